/* cm/addr.h: how cm/ holds an IP address.  Every address is 16 bytes in
 * GID form: IPv6 as is, IPv4 as ::ffff:a.b.c.d (the form of the device's
 * IPv4 GID), so one comparison serves both families and an address is
 * its GID.  The application's family follows from the form: an AF_INET6
 * sockaddr never holds an IPv4-mapped address here (cm_ip_from_sa refuses
 * it, as Linux's rdma_cm finds no device owning one).  A link-local IPv6
 * address travels with its scope (interface index). */
#ifndef CM_ADDR_H
#define CM_ADDR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>

static const uint8_t cm_v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

static inline bool cm_ip_is_v4(const uint8_t ip[16])
{
	return !memcmp(ip, cm_v4_prefix, 12);
}

static inline int cm_ip_family(const uint8_t ip[16])
{
	return cm_ip_is_v4(ip) ? AF_INET : AF_INET6;
}

/* The wildcard of either family: :: or ::ffff:0.0.0.0. */
static inline bool cm_ip_is_any(const uint8_t ip[16])
{
	static const uint8_t zero[16];

	return !memcmp(ip, zero, 16) || (cm_ip_is_v4(ip) && !memcmp(ip + 12, zero, 4));
}

static inline bool cm_ip_is_linklocal(const uint8_t ip[16])
{
	return ip[0] == 0xfe && (ip[1] & 0xc0) == 0x80;
}

/* 127.0.0.0/8 or ::1 */
static inline bool cm_ip_is_loopback(const uint8_t ip[16])
{
	static const uint8_t loop6[16] = { [15] = 1 };

	return cm_ip_is_v4(ip) ? ip[12] == 127 : !memcmp(ip, loop6, 16);
}

static inline void cm_ip_from_v4(uint8_t ip[16], const void *v4)
{
	memcpy(ip, cm_v4_prefix, 12);
	memcpy(ip + 12, v4, 4);
}

/* ip, port (host order) and scope of an AF_INET / AF_INET6 sockaddr: 0,
 * -EAFNOSUPPORT for another family, -EADDRNOTAVAIL for an IPv4-mapped
 * AF_INET6 address.  port and scope may be NULL. */
int cm_ip_from_sa(const struct sockaddr *sa, uint8_t ip[16], uint16_t *port, uint32_t *scope);

/* The sockaddr of ip (family by its form), port in host order. */
void cm_ip_to_sa(struct sockaddr_storage *ss, const uint8_t ip[16], uint16_t port,
		 uint32_t scope);

/* "a.b.c.d" or "x::y" (with "%scope" when non-zero) in buf. */
const char *cm_ip_str(const uint8_t ip[16], uint32_t scope, char buf[64]);

#endif
