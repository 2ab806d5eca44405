/* net/mode: which path packets to a same-host peer take.
 * SOFTRNIC_TRANSPORT=udp forces the UDP (RoCEv2) path everywhere; the
 * default (auto, or unset) uses shared memory when both ends are on this
 * host.  Read once per process. */
#ifndef NET_MODE_H
#define NET_MODE_H

#include <stdbool.h>

/* True unless SOFTRNIC_TRANSPORT=udp. */
bool net_shm_allowed(void);

/* Two-sided traffic (SENDs, ACKs, read responses) to same-host peers
 * through their shared-memory inboxes: opt-in with SOFTRNIC_SHM_RING=1
 * (and not under SOFTRNIC_TRANSPORT=udp).  Off by default while a hang
 * with many QPs per process pair is open (README "Known problems"). */
bool net_shm_ring_enabled(void);

/* The initiator executes operations on a same-host target itself
 * (transport/direct.c, direct_send.c): on unless SOFTRNIC_DIRECT=0 (then
 * same-host traffic is packets, through the inboxes or UDP) or under
 * SOFTRNIC_TRANSPORT=udp. */
bool net_direct_enabled(void);

/* Direct delivery also into CQs with a completion channel (the sender
 * rings the owner's doorbell when armed): on unless
 * SOFTRNIC_DIRECT_CHANNEL=0. */
bool net_direct_channel_enabled(void);

#endif
