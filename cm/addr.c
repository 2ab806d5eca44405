/* Conversions between the application's sockaddrs and cm/'s 16-byte
 * addresses (cm/addr.h). */
#include <errno.h>

#include "cm/addr.h"

int cm_ip_from_sa(const struct sockaddr *sa, uint8_t ip[16], uint16_t *port, uint32_t *scope)
{
	uint16_t p;
	uint32_t s = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		cm_ip_from_v4(ip, &sin->sin_addr);
		p = ntohs(sin->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		memcpy(ip, &s6->sin6_addr, 16);
		if (cm_ip_is_v4(ip))
			return -EADDRNOTAVAIL;
		p = ntohs(s6->sin6_port);
		if (cm_ip_is_linklocal(ip))
			s = s6->sin6_scope_id;
	} else {
		return -EAFNOSUPPORT;
	}
	if (port)
		*port = p;
	if (scope)
		*scope = s;
	return 0;
}

void cm_ip_to_sa(struct sockaddr_storage *ss, const uint8_t ip[16], uint16_t port,
		 uint32_t scope)
{
	memset(ss, 0, sizeof(*ss));
	if (cm_ip_is_v4(ip)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, ip + 12, 4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, ip, 16);
		s6->sin6_scope_id = scope;
	}
}

const char *cm_ip_str(const uint8_t ip[16], uint32_t scope, char buf[64])
{
	if (cm_ip_is_v4(ip)) {
		inet_ntop(AF_INET, ip + 12, buf, 64);
	} else {
		inet_ntop(AF_INET6, ip, buf, 48);
		if (scope)
			snprintf(buf + strlen(buf), 16, "%%%u", scope);
	}
	return buf;
}
