# SndbufTune is not allowed in .htaccess: with AllowOverride All, a
# .htaccess using it (t/htdocs/htaccess/.htaccess) makes the request fail
# with 500 and httpd logs that SndbufTune is not allowed there.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";

use Apache::Test qw(-withtestmore);
use Apache::TestRequest qw(GET);
use Apache::TestUtil qw(t_start_error_log_watch t_finish_error_log_watch);

plan tests => 2;

Apache::TestRequest::module('sndbuf');
t_start_error_log_watch();
my $res = GET '/htaccess/index.txt', Host => 'none.test';
is($res->code, 500, '.htaccess with SndbufTune: 500');
my @log = t_finish_error_log_watch();
ok(scalar(grep { /SndbufTune not allowed here/ } @log),
   'error log: SndbufTune not allowed here') or diag(join '', @log);
