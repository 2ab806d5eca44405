/* net/shm_sweep: removing the /dev/shm files that killed processes left
 * (an engine's inbox, its stats file), by the engine that starts next. */
#ifndef NET_SHM_SWEEP_H
#define NET_SHM_SWEEP_H

#include <stdbool.h>
#include <stddef.h>

/* Does the file at path belong to a live process?  Its owner word
 * (net/proc.h) is the 64 bits at owner_off.  A file too short to hold it
 * is not (its creator died before sizing it); one we cannot open is
 * (leave it alone). */
bool net_shm_file_owned(const char *path, size_t owner_off);

/* Unlink our own regular files /dev/shm/<prefix>* whose owner word at
 * owner_off names no live process.  Bounded (256 files looked at); files
 * changed in the last few seconds are left: their creator may not have
 * written its owner word yet. */
void net_shm_sweep(const char *prefix, size_t owner_off);

#endif
