/* Marks a function as part of the public ABI (everything else is hidden). */
#ifndef SRN_EXPORT_H
#define SRN_EXPORT_H
#define SRN_EXPORT __attribute__((visibility("default")))
#endif
