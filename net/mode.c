/* net/mode: SOFTRNIC_TRANSPORT (see mode.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/mode.h"

static bool shm_allowed = true;
static bool ring_enabled;
static bool direct_enabled = true;
static bool direct_channel = true;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
	const char *e = getenv("SOFTRNIC_TRANSPORT");
	const char *r = getenv("SOFTRNIC_SHM_RING");
	const char *d = getenv("SOFTRNIC_DIRECT");
	const char *dc = getenv("SOFTRNIC_DIRECT_CHANNEL");

	ring_enabled = r && !strcmp(r, "1");
	direct_enabled = !d || strcmp(d, "0");
	direct_channel = !dc || strcmp(dc, "0");

	if (!e || !*e || !strcmp(e, "auto") || !strcmp(e, "shm"))
		return;
	if (!strcmp(e, "udp")) {
		shm_allowed = false;
		return;
	}
	fprintf(stderr, "softrnic: SOFTRNIC_TRANSPORT=%s unknown (auto|shm|udp); using auto\n", e);
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
