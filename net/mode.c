/* net/mode: SOFTRNIC_TRANSPORT (see mode.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/mode.h"
#include "net/settings.h"

static bool shm_allowed = true;
static bool ring_enabled;
static bool direct_enabled = true;
static bool direct_channel = true;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
	ring_enabled = srn_setting(SRN_SET_SHM_RING, NULL);
	direct_enabled = srn_setting(SRN_SET_DIRECT, NULL);
	direct_channel = srn_setting(SRN_SET_DIRECT_CHANNEL, NULL);
	shm_allowed = srn_setting(SRN_SET_TRANSPORT, NULL) != SRN_TRANSPORT_UDP;
}

bool net_shm_allowed(void)
{
	pthread_once(&once, read_env);
	return shm_allowed;
}

bool net_direct_enabled(void)
{
	pthread_once(&once, read_env);
	return shm_allowed && direct_enabled;
}

bool net_direct_channel_enabled(void)
{
	pthread_once(&once, read_env);
	return shm_allowed && direct_enabled && direct_channel;
}

bool net_shm_ring_enabled(void)
{
	pthread_once(&once, read_env);
	return shm_allowed && ring_enabled;
}
