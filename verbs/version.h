/* softrnic's version: keep in step with project(VERSION) in CMakeLists.txt.
 * Shown by `softrnic version` and as the device's fw_ver. */
#ifndef SRN_VERSION_H
#define SRN_VERSION_H
#define SRN_VERSION "0.1.0"
#endif
