/* SPDX-License-Identifier: Apache-2.0 */

/* t/helpers/httpd_stubs.c: httpd's startup calls, for sndbuf_path.c
 * outside httpd. */

#ifndef SBT_HTTPD_STUBS_H
#define SBT_HTTPD_STUBS_H

#include "httpd.h"

/** Run the post_config hook registered so far, as httpd would at
 *  startup. */
void sbt_stubs_start(apr_pool_t *pool, server_rec *s);

#endif
