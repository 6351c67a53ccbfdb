/* SPDX-License-Identifier: Apache-2.0 */

/* t/helpers/httpd_stubs.c: httpd's startup calls, for sndbuf_path.c
 * outside httpd. */

#ifndef SBT_HTTPD_STUBS_H
#define SBT_HTTPD_STUBS_H

#include "httpd.h"

/** Start sndbuf_path.c as httpd would: APR, its hooks, then its
 *  post_config with one pool and a bare server. */
void sbt_stubs_start(void);

#endif
