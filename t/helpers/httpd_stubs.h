/* SPDX-License-Identifier: Apache-2.0 */

/* t/helpers/httpd_stubs.c: httpd's startup calls, for sndbuf_path.c
 * outside httpd. */

#ifndef SBT_HTTPD_STUBS_H
#define SBT_HTTPD_STUBS_H

#include "httpd.h"

/** Start APR and run the post_config hook registered so far, as httpd
 *  would at startup, with one pool and a bare server. */
void sbt_stubs_start(void);

#endif
