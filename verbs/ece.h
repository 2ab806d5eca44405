/* verbs/ece: softrnic's tag in ibv_ece.vendor_id (not an IEEE OUI; ECE
 * peers compare it whole) and its option bits (verbs/ece.c). */
#ifndef VERBS_ECE_H
#define VERBS_ECE_H

#define SRN_ECE_VENDOR 0x53524eu     /* "SRN" */
#define SRN_ECE_SELECTIVE_RETX 0x1u  /* transport/sr.c */

#endif
