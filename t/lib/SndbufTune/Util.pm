package SndbufTune::Util;
# The small helpers every test library, test and tool shares; one copy each.
#
#   top_dir()               the repository's top directory
#   module_path()           the mod_sndbuf_tune.so under test: $SBT_MODULE,
#                           or <repo>/.libs/mod_sndbuf_tune.so
#   httpd_command(@args)    the command line that runs apache2 (t/bin/httpd,
#                           which honours SBT_HTTPD, SBT_HTTPD_PRELOAD and
#                           SBT_HTTPD_WRAPPER)
#   modules_dir()           where apache2's own modules are (mod_*.so)
#   free_port()             a free TCP port on 127.0.0.1
#   poll_until($timeout, $probe, $interval)
#                           bounded polling instead of sleeping; every
#                           timeout is multiplied by $SBT_TIMEOUT_SCALE
#                           (default 1), e.g. 10 under valgrind
#   capture(@cmd)           (exit code, stdout+stderr) of a command
#   sha256_file($path)      hex SHA-256 of a file
#   exit_on_signals()       INT, TERM, HUP and PIPE become exit(), so that
#                           END blocks and DESTROY stop what was started
#   parse_auto($text)       a status page's ?auto (mod_status's or the
#                           module's): ({Key => value}, [bad lines], first
#                           line if it names the server, as mod_status's)
#   preload_library($name)  t/helpers/$name.c built as an LD_PRELOAD
#                           library (for SBT_HTTPD_PRELOAD) when missing or
#                           older than its source: its path, or undef with
#                           the compiler's output in $@
use strict;
use warnings;

use Cwd ();
use Digest::SHA ();
use Exporter 'import';
use File::Basename ();
use IO::Socket::INET;
use POSIX ();
use Time::HiRes ();

our @EXPORT_OK = qw(top_dir module_path httpd_command modules_dir free_port
                    poll_until capture sha256_file exit_on_signals
                    parse_auto preload_library);

# This file is t/lib/SndbufTune/Util.pm.
sub top_dir {
    my $here = File::Basename::dirname(Cwd::abs_path(__FILE__));
    return Cwd::abs_path("$here/../../..");
}

sub module_path {
    return $ENV{SBT_MODULE} || top_dir() . '/.libs/mod_sndbuf_tune.so';
}

sub httpd_command {
    return (top_dir() . '/t/bin/httpd', @_);
}

sub modules_dir {
    my $d = '/usr/lib/apache2/modules';
    return $d if -d $d;
    my ($rc, $q) = capture('apxs', '-q', 'LIBEXECDIR');
    chomp $q;
    return $q;
}

# The kernel picks the port; we release it at once.
sub free_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
                                  Proto => 'tcp', Listen => 1, ReuseAddr => 1)
        or die "free port: $!";
    my $p = $s->sockport;
    $s->close;
    return $p;
}

# Call $probe until it returns a true value or $timeout seconds pass.
# Returns that value, or undef on timeout, in list and scalar context
# alike (a timeout is false even where a caller tests it as a boolean).
# Never sleeps longer than $interval (default 0.01 s) between probes.
sub poll_until {
    my ($timeout, $probe, $interval) = @_;
    $interval //= 0.01;
    $timeout *= $ENV{SBT_TIMEOUT_SCALE} if $ENV{SBT_TIMEOUT_SCALE};
    my $deadline = Time::HiRes::time() + $timeout;
    while (1) {
        my $r = $probe->();
        return $r if $r;
        return undef if Time::HiRes::time() > $deadline;
        Time::HiRes::sleep($interval);
    }
}

# Run a command (no shell); returns (exit code, stdout and stderr together).
# Exit code 127: it could not be run.
sub capture {
    my @cmd = @_;
    my $pid = open(my $fh, '-|');
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        open STDERR, '>&', \*STDOUT;
        open STDIN, '<', '/dev/null';
        exec @cmd or POSIX::_exit(127);
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? == -1 ? 127 : $? >> 8, $out);
}

sub preload_library {
    my $name = shift;
    my $src = top_dir() . "/t/helpers/$name.c";
    my $lib = top_dir() . "/t/helpers/$name.so";
    return $lib if -f $lib && -M $lib <= -M $src;
    my ($rc, $out) = capture($ENV{CC} || 'cc', qw(-shared -fPIC -O2 -Wall
                             -Wextra -o), $lib, $src, '-ldl');
    $@ = "building $lib: $out";
    return $rc == 0 ? $lib : undef;
}

sub sha256_file {
    my $path = shift;
    my $sha = Digest::SHA->new(256);
    $sha->addfile($path, 'b');
    return $sha->hexdigest;
}

# ?auto: "Key: value" lines (a value may be empty: "Key:"), no key twice.
# mod_status's starts with the name the request used, a line without a
# colon: returned third, not taken for a bad line. Lines that are neither,
# and keys given twice, are returned as bad.
sub parse_auto {
    my $text = shift // '';
    my @lines = split /\n/, $text;
    my $host = @lines && $lines[0] !~ /:/ ? shift @lines : undef;
    my (%h, @bad);
    for (@lines) {
        if (/^([^:\s][^:]*):(?: (.*))?$/ && !exists $h{$1}) {
            $h{$1} = $2 // '';
        }
        else {
            push @bad, $_;
        }
    }
    return (\%h, \@bad, $host);
}

# A signal (Ctrl-C, prove killed, a closed pipe) must not leave a server
# or a lab behind. Handlers the caller set itself are left alone.
sub exit_on_signals {
    for my $sig (qw(INT TERM HUP PIPE)) {
        next if defined $SIG{$sig} && $SIG{$sig} ne 'DEFAULT';
        $SIG{$sig} = sub {
            $SIG{$sig} = 'IGNORE';
            $SIG{PIPE} = 'IGNORE';
            print STDERR "# SIG$sig: cleaning up\n" unless $sig eq 'PIPE';
            exit($sig eq 'INT' ? 130 : 143);
        };
    }
}

1;
