/* Device list internals shared inside verbs/ (verbs/device.c). */
#ifndef SRN_DEVICE_H
#define SRN_DEVICE_H

#include "verbs/srn.h"

/* d is a device of this process's list (not a foreign pointer). */
bool srn_device_valid(const struct ibv_device *d);

#endif
