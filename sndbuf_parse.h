/* SPDX-License-Identifier: Apache-2.0 */
/* Provisional: replaced by the parser unit (sndbuf_parse.c). */
#ifndef SNDBUF_PARSE_H
#define SNDBUF_PARSE_H

#define SBT_SIZE_MIN        (4 * 1024)
#define SBT_SIZE_MAX        (1024 * 1024 * 1024)

typedef enum {
    SBT_POLICY_NONE = 0,
    SBT_POLICY_UNSET,
    SBT_POLICY_FIXED,
    SBT_POLICY_AUTO
} sbt_policy_e;

typedef struct {
    int family;
    unsigned char addr[16];
    int prefix;
} sbt_cidr_t;

#endif
