#!/usr/bin/perl
# t/package/deb.t: the Debian package, built, installed and removed on this
# machine the way an administrator does it (issue 11).
#
#   1. Build: dpkg-buildpackage -us -uc -b in a temporary copy of the tree
#      (git's tracked and untracked-but-not-ignored files), so the source
#      tree and its parent directory get nothing. lintian -I --pedantic on
#      the .changes: no error and no warning.
#   2. Install: apt-get install /path/to/<deb>. dpkg -L lists the module, the
#      .load/.conf and the docs; the postinst enabled the module
#      (apache2-maintscript-helper) and asked for an apache2 restart.
#      a2enmod sndbuf_tune, apache2ctl -M, apache2ctl configtest.
#   3. Serve: Debian's own apache2 configuration (/etc/apache2, as
#      installed) plus one line, `SndbufTune 64k`, in
#      conf-available/sndbuf-tune-test.conf (a2enconf). The server runs in a
#      private network namespace, so it never listens on this machine's
#      interfaces nor meets its other servers. A client in the namespace
#      stops reading a 16 MB download: the server socket's send buffer
#      (ss -tmni, skmem tb) is 2 * min(65536, net.core.wmem_max), and stays
#      there after 4 MB more are pulled (the size is locked). Control:
#      a2disconf + graceful, and a fresh download's tb grows past that
#      value (kernel autotuning), so the first check can fail.
#      The pages: README.md and docs/*.md under /usr/share/doc, not
#      compressed; every relative link between them leads to an installed
#      file; every doc path the module's messages name (its .so) exists.
#   4. Roll back: README.md's ```apache blocks (its recipes) in a second
#      snippet: configtest passes with the module, and after a2dismod
#      without it. A third snippet with a bare `SndbufTune auto`: apt-get
#      remove fails, says NOT REMOVED and names the snippet's line, and
#      leaves the package installed, the module enabled and configtest
#      passing; the same line inside <IfModule sndbuf_tune_module>:
#      apt-get remove succeeds, the module is disabled and configtest
#      passes with both snippets still enabled.
#   5. Remove: apache2ctl stop, a2disconf, apt-get purge. Every file
#      dpkg -L listed is gone, and every directory the package created;
#      no sndbuf_tune link in mods-enabled, no state under
#      /var/lib/apache2.
#   6. The machine is as it was: /etc/apache2's *-enabled and *-available,
#      /var/lib/apache2, /usr/lib/apache2/modules, the document root and
#      this machine's own apache2 service (its pid) compare equal to the
#      snapshot taken first.
#
# What the test does NOT touch: the machine's own apache2 service. The
# test's server is a second apache2 with Debian's configuration but its own
# pid file, lock, run and log directories (APACHE_ENVVARS: a file that
# sources /etc/apache2/envvars and moves those four), started with
# `apache2ctl -k start` (plain `apache2ctl start` hands over to systemctl on
# a systemd machine, outside the namespace). The maintainer scripts' service
# restarts (invoke-rc.d apache2 restart) go to a stub that records them,
# through apt's DPkg::Path for this test's apt-get only; nothing is
# installed system-wide for that.
#
# Cleanup runs in an END block (and on INT/TERM/HUP): the server and the
# client are stopped, the snippet, the test file and the namespace removed,
# and the package purged if this test installed it.
#
# Needs root and dpkg-buildpackage, debhelper, dh_apache2 (apache2-dev),
# apache2, apt-get, ip, ss, lintian. Skips when one is missing or when the
# package is already installed here, or its conffiles are (the test would
# replace and purge the administrator's copy); with CI set in the
# environment those are failures.
# Synchronisation is by bounded polling; nothing asserts on wall-clock time.
use strict;
use warnings;

use Cwd ();
use File::Basename ();
use File::Path ();
use File::Temp ();
use IO::Select;
use IPC::Open2 ();
use POSIX ();
use Test::More;
use Time::HiRes ();

my $PKG      = 'libapache2-mod-sndbuf-tune';
my $NS       = 'sbt-pkg-test';
my $SNIPPET  = 'sndbuf-tune-test';
my $RECIPES  = 'sndbuf-tune-test-recipes';
my $BARE     = 'sndbuf-tune-test-bare';
sub confav { return "/etc/apache2/conf-available/$_[0].conf" }
my $CONFAV   = confav($SNIPPET);
my $DOCROOT  = '/var/www/html';
my $FILE     = 'sbt-pkg-test.bin';
my $FILESIZE = 16 << 20;
my $SIZE     = 65536;           # SndbufTune 64k
my $PULL     = 4 << 20;         # bytes pulled through between two looks
my $POLL     = 30;              # seconds, bound of every wait

my $TOP = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/../..');

# ---------------------------------------------------------------------------
# Preconditions: skip (fail under CI) when a tool is missing or the
# package is installed already. Checked below the helpers.

sub have {
    my $cmd = shift;
    return grep { -x "$_/$cmd" } split(/:/, $ENV{PATH}),
        qw(/usr/sbin /sbin /usr/bin);
}
$ENV{PATH} = "$ENV{PATH}:/usr/sbin:/sbin";
$ENV{LC_ALL} = 'C';             # apt's summary line is parsed

sub cannot_run {
    my $why = shift;
    if ($ENV{CI}) {
        plan tests => 1;
        fail("CI: cannot run the package test: $why");
        exit 1;
    }
    plan skip_all => $why;
}

# ---------------------------------------------------------------------------
# Small helpers

# run({env => {...}, dir => ...}, cmd...): (success, stdout+stderr). The
# command runs in a process group of its own, so that a signal can stop
# all of it (see the END block).
my ($CHILD, $CHILD_CMD);
sub run {
    my $opt = ref $_[0] eq 'HASH' ? shift : {};
    my @cmd = @_;
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if (!$pid) {
        POSIX::setpgid(0, 0);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(127);
        open STDIN, '<', '/dev/null' or POSIX::_exit(127);
        $ENV{$_} = $opt->{env}{$_} for keys %{$opt->{env} || {}};
        chdir $opt->{dir} or POSIX::_exit(127) if $opt->{dir};
        exec @cmd or do { print "exec $cmd[0]: $!\n"; POSIX::_exit(127) };
    }
    POSIX::setpgid($pid, $pid);  # as the child does: no window for a signal
    ($CHILD, $CHILD_CMD) = ($pid, $cmd[0]);
    local $/;
    my $out = <$fh> // '';
    close $fh;
    $CHILD = undef;
    return ($? == 0, $out);
}

# run_ok(name, [opts,] cmd...): a test that the command succeeds
sub run_ok {
    my $name = shift;
    my ($ok, $out) = run(@_);
    ok($ok, $name) or diag("\$ @{[grep { !ref } @_]}\n$out");
    return wantarray ? ($ok, $out) : $ok;
}

sub poll_until {
    my ($timeout, $probe) = @_;
    my $deadline = Time::HiRes::time() + $timeout;
    while (1) {
        my @r = $probe->();
        return @r if $r[0];
        return if Time::HiRes::time() > $deadline;
        Time::HiRes::sleep(0.05);
    }
}

sub slurp {
    my $f = shift;
    open my $fh, '<', $f or return undef;
    local $/;
    return scalar <$fh>;
}

sub pkg_installed {
    my ($ok, $out) = run('dpkg-query', '-W', '-f=${db:Status-Abbrev}', $PKG);
    return $ok && $out =~ /^[a-z]i/;
}

sub pkg_known {
    my ($ok, $out) = run('dpkg-query', '-W', '-f=${db:Status-Abbrev}', $PKG);
    return $ok && $out =~ /\S/ && $out !~ /^un/;
}

sub pid_alive {
    my $pid = shift;
    return $pid && kill(0, $pid);
}

sub pidfile_pid {
    my $s = slurp(shift) // return undef;
    return $s =~ /^(\d+)/ ? $1 : undef;
}

sub listing {
    my $dir = shift;
    opendir my $dh, $dir or return [];
    return [ map { my $l = readlink "$dir/$_"; defined $l ? "$_ -> $l" : $_ }
             sort grep { !/^\.\.?$/ } readdir $dh ];
}

sub tree {
    my $dir = shift;
    my @out;
    my @todo = ($dir);
    while (defined(my $d = shift @todo)) {
        for (@{ listing($d) }) {
            push @out, "$d/$_";
            push @todo, "$d/$_" if -d "$d/$_" && !-l "$d/$_";
        }
    }
    return [ sort @out ];
}

# The machine's own apache2 (Debian's pid file): pid and start time, so a
# restart shows.
sub host_apache2 {
    my $pid = pidfile_pid('/run/apache2/apache2.pid')
        // pidfile_pid('/var/run/apache2/apache2.pid');
    return 'not running' unless pid_alive($pid);
    my $stat = slurp("/proc/$pid/stat") // '';
    my $start = (split ' ', ($stat =~ s/^.*\)\s*//sr))[19] // '?';
    return "pid $pid started $start";
}

sub snapshot {
    my %s = (package => pkg_known() ? 'known to dpkg' : 'not installed',
             host_apache2 => host_apache2(),
             docroot => listing($DOCROOT),
             modules => listing('/usr/lib/apache2/modules'),
             var_lib_apache2 => tree('/var/lib/apache2'));
    $s{$_} = listing("/etc/apache2/$_")
        for qw(mods-enabled mods-available conf-enabled conf-available
               sites-enabled);
    return \%s;
}

cannot_run('needs root (installs and purges a package)') if $> != 0;
my @missing = grep { !have($_) }
    qw(dpkg-buildpackage dpkg-checkbuilddeps dh dh_apache2 apache2ctl
       a2enmod a2dismod a2enconf a2disconf a2query apt-get dpkg dpkg-query
       dpkg-deb ip ss lintian);
cannot_run("missing: @missing (apt-get install debhelper dpkg-dev "
           . "apache2 apache2-dev iproute2 lintian)") if @missing;
{
    my ($ok, $out) = run({dir => $TOP}, 'dpkg-checkbuilddeps');
    cannot_run("build dependencies: $out") unless $ok;
}
cannot_run("$PKG is installed on this machine (or its conffiles are): the "
           . "test would replace and purge it") if pkg_known();
for my $f ("$DOCROOT/$FILE", map { confav($_) } $SNIPPET, $RECIPES, $BARE) {
    cannot_run("$f exists (left by a killed run? remove it)") if -e $f;
}

# ---------------------------------------------------------------------------
# State and cleanup

my $BEFORE = snapshot();
my $W = File::Temp::tempdir('sbt-pkg-test.XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $RUN = File::Temp::tempdir('sbt-pkg-run.XXXXXX', TMPDIR => 1,
                              CLEANUP => 1);
chmod 0755, $RUN;               # apache2's children reopen the lock files
my $ENVVARS = "$RUN/envvars";
my $PIDFILE = "$RUN/run/apache2.pid";
my $STUBLOG = "$W/stub/invoke-rc.d.log";
my %made;                       # what cleanup must undo
my %client;                     # pid => 1 of clients still running

my $SERVER_ENV = {APACHE_ENVVARS => $ENVVARS};
my $APT_ENV = {DEBIAN_FRONTEND => 'noninteractive',
               APT_LISTCHANGES_FRONTEND => 'none'};
# apt runs dpkg, and so the maintainer scripts, with PATH = DPkg::Path
my @APT = ('apt-get', '-y', '-o', 'DPkg::Lock::Timeout=120',
           '-o', "DPkg::Path=$W/stub:/usr/sbin:/usr/bin:/sbin:/bin");

sub ns { return ('ip', 'netns', 'exec', $NS, @_) }

sub server_stop {
    my $pid = pidfile_pid($PIDFILE);
    return 1 unless pid_alive($pid);
    run({env => $SERVER_ENV}, ns('apache2ctl', 'stop'));
    return 1 if poll_until($POLL, sub { !pid_alive($pid) });
    kill 'KILL', $pid;
    return 0;
}

sub cleanup {
    if ($CHILD) {               # interrupted while a command ran
        waitpid($CHILD, 0);
        $CHILD = undef;
    }
    kill 'KILL', $_ for grep { pid_alive($_) } keys %client;
    waitpid($_, 0) for keys %client;
    %client = ();
    server_stop() if $made{server};
    if ($made{netns}) {
        my (undef, $pids) = run('ip', 'netns', 'pids', $NS);
        kill 'KILL', $_ for $pids =~ /(\d+)/g;
        run('ip', 'netns', 'delete', $NS);
    }
    snippet_remove($_) for grep { $made{"snippet $_"} }
        $SNIPPET, $RECIPES, $BARE;
    unlink "$DOCROOT/$FILE" if $made{file};
    rmdir $DOCROOT if $made{docroot};
    if ($made{package} && pkg_known()) {
        run('a2dismod', '-q', '-f', 'sndbuf_tune')
            if -l '/etc/apache2/mods-enabled/sndbuf_tune.load';
        run({env => $APT_ENV}, @APT, 'purge', $PKG);
    }
    %made = ();
    state_dirs_restore();
}

# A snippet $name with $text, enabled (a2enconf).
sub snippet_add {
    my ($name, $text) = @_;
    $made{"snippet $name"} = 1;
    open my $fh, '>', confav($name) or die confav($name) . ": $!";
    print $fh $text;
    close $fh or die confav($name) . ": $!";
    return run_ok("a2enconf $name", 'a2enconf', $name);
}

# A snippet: disabled, deleted, and its state marker under
# /var/lib/apache2 (a2disconf leaves one) purged.
sub snippet_remove {
    my $name = shift;
    run('a2disconf', '-q', $name)
        if -l "/etc/apache2/conf-enabled/$name.conf";
    unlink confav($name);
    run('a2disconf', '-q', '-p', $name);
    delete $made{"snippet $name"};
}

# a2enmod & co. create their state directories under /var/lib/apache2 on
# first use; remove those that were not there before and are empty now.
sub state_dirs_restore {
    my %was = map { $_ => 1 } @{ $BEFORE->{var_lib_apache2} };
    rmdir $_ for grep { !$was{$_} && -d $_ && !-l $_ }
        reverse @{ tree('/var/lib/apache2') };
}

END {
    local $?;
    cleanup();
}
# A signal stops the command that runs, unless it is apt-get: dpkg is
# left to finish, then cleanup purges.
$SIG{$_} = sub {
    kill 'TERM', -$CHILD if $CHILD && $CHILD_CMD ne 'apt-get';
    exit 130;
} for qw(INT TERM HUP);

# ---------------------------------------------------------------------------
# The client, in the namespace: sends the request, reads the response
# header one byte at a time (none of the body), reports its port, then
# reads the body only when told to.

my $CLIENT = <<'EOF';
use strict; use warnings; use IO::Socket::INET;
$| = 1;
my ($port, $path) = @ARGV;
my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                              Proto => 'tcp') or die "connect: $!\n";
print $s "GET $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
my $head = '';
while ($head !~ /\r\n\r\n\z/) {
    sysread($s, $head, 1, length $head) or die "end of header: $!\n";
}
my ($status) = $head =~ m{^HTTP/\S+ (\d+)};
my ($len) = $head =~ /^Content-Length:\s*(\d+)/mi;
print "HEAD ", $status // 0, " ", $s->sockport, " ", $len // -1, "\n";
while (my $cmd = <STDIN>) {
    my ($want) = $cmd =~ /^READ (\d+)/ or last;
    my $got = 0;
    while ($got < $want) {
        my $n = $want - $got < 65536 ? $want - $got : 65536;
        $n = sysread($s, my $buf, $n) or last;
        $got += $n;
    }
    print "READ $got\n";
}
EOF

sub client_start {
    my $port = shift;
    my $pid = IPC::Open2::open2(my $out, my $in,
        ns('perl', '-e', $CLIENT, $port, "/$FILE"));
    $client{$pid} = 1;
    my $c = {pid => $pid, out => $out, in => $in};
    my $line = client_line($c) // '';
    @$c{qw(status port length)} = $line =~ /^HEAD (\d+) (\d+) (-?\d+)/;
    return $c;
}

sub client_line {
    my $c = shift;
    return undef unless IO::Select->new($c->{out})->can_read($POLL);
    my $line = readline $c->{out};
    chomp $line if defined $line;
    return $line;
}

sub client_read {
    my ($c, $n) = @_;
    print { $c->{in} } "READ $n\n";
    $c->{in}->flush;
    my $line = client_line($c) // '';
    return $line =~ /^READ (\d+)/ ? $1 : 0;
}

sub client_quit {
    my $c = shift;
    close $c->{in};
    close $c->{out};
    poll_until($POLL, sub { waitpid($c->{pid}, POSIX::WNOHANG()) != 0 })
        or do { kill 'KILL', $c->{pid}; waitpid($c->{pid}, 0) };
    delete $client{$c->{pid}};
}

# ss -tmni in the namespace for the server's end of the client's connection
sub server_tb {
    my ($port, $cport) = @_;
    my ($ok, $out) = run(ns('ss', '-H', '-tmni', 'state', 'established',
                            "( sport = :$port and dport = :$cport )"));
    my ($tb) = $out =~ /skmem:\([^)]*\btb(\d+)/ or return;
    (my $flat = $out) =~ s/\s+/ /g;
    return ($tb, $flat);
}

sub wmem_max {
    my $v = slurp('/proc/sys/net/core/wmem_max') // '';
    return $v =~ /(\d+)/ ? $1 : 0;
}

sub globbed { my @m = glob shift; return scalar @m }

sub tcp_wmem_max {
    my $v = slurp('/proc/sys/net/ipv4/tcp_wmem') // '';
    return (split ' ', $v)[2] // 0;
}

# children of the server's parent process
sub server_children {
    my $ppid = shift;
    my @kids;
    opendir my $dh, '/proc' or return ();
    for my $pid (grep { /^\d+$/ } readdir $dh) {
        my $stat = slurp("/proc/$pid/stat") // next;
        my $parent = (split ' ', ($stat =~ s/^.*\)\s*//sr))[1] // next;
        push @kids, $pid if $parent == $ppid;
    }
    return @kids;
}

# ---------------------------------------------------------------------------

my $T0 = Time::HiRes::time();
main();
cleanup();
is_deeply(snapshot(), $BEFORE,
          'the machine is as it was: package, /etc/apache2, /var/lib/apache2, '
          . 'modules, document root, its own apache2');
ok(!grep({ /^\Q$NS\E\b/ } split /\n/, (run('ip', 'netns', 'list'))[1]),
   "namespace $NS is gone");
diag(sprintf 'package test: %.1f s', Time::HiRes::time() - $T0);
done_testing();

# The installed pages: every relative link leads to an installed file,
# and every doc path the module's messages name exists.
sub docs_ok {
    my @pages = @_;
    my @bad;
    for my $page (@pages) {
        my $text = slurp($page) // '';
        $text =~ s/^\s*```.*?^\s*```//msg;
        (my $dir = $page) =~ s{[^/]*$}{};
        while ($text =~ /\]\(([^)\s#]*)(?:#[^)\s]*)?\)/g) {
            my $link = $1;
            next if $link eq '' || $link =~ m{^[a-z]+:};
            my $target = $dir . $link;
            1 while $target =~ s{[^/]+/\.\./}{};
            push @bad, "$page: $link" unless -e $target;
        }
    }
    ok(@pages >= 6 && !@bad, 'the installed pages: every relative link leads '
       . 'to an installed file (' . scalar(@pages) . ' pages)')
        or diag(join "\n", @bad);
    my $so = slurp('/usr/lib/apache2/modules/mod_sndbuf_tune.so') // '';
    my %named = map { $_ => 1 } $so =~ m{(/usr/share/doc/[\w./-]+?\.md)}g;
    my @missing = grep { !-f } sort keys %named;
    ok(%named >= 3 && !@missing, 'every doc path the module\'s messages '
       . 'name is installed: ' . join(' ', sort keys %named))
        or diag("missing: @missing");
}

# README.md's recipes keep the configuration valid without the module,
# and removing the package refuses a configuration that would not be.
sub rollback_ok {
    my $readme = slurp("$TOP/README.md") // '';
    my @blocks = $readme =~ /^\s*```apache\n(.*?)^\s*```/msg;
    ok(@blocks >= 5, scalar(@blocks) . ' recipes in README.md') or return;
    snippet_add($RECIPES, join "\n", @blocks) or return;
    run_ok('configtest with the recipes', 'apache2ctl', 'configtest')
        or return;
    run_ok('a2dismod sndbuf_tune, the recipes in place', 'a2dismod', '-q',
           'sndbuf_tune') or return;
    run_ok('configtest without the module, the recipes in place',
           'apache2ctl', 'configtest');
    run_ok('a2enmod sndbuf_tune again', 'a2enmod', '-q', 'sndbuf_tune')
        or return;

    snippet_add($BARE, "SndbufTune auto\n") or return;
    run_ok('configtest with a bare SndbufTune line and the module',
           'apache2ctl', 'configtest') or return;
    my ($removed, $out) = run({env => $APT_ENV}, @APT, 'remove', $PKG);
    my $line = confav($BARE) . ':1:';
    ok(!$removed && $out =~ /NOT REMOVED/ && index($out, $line) >= 0,
       "apt-get remove stops, naming $line") or diag($out);
    ok(pkg_installed() && -l '/etc/apache2/mods-enabled/sndbuf_tune.load',
       'the package is installed still, the module enabled');
    run_ok('configtest passes as before', 'apache2ctl', 'configtest');

    snippet_add($BARE, "<IfModule sndbuf_tune_module>\n    SndbufTune auto\n"
                . "</IfModule>\n") or return;
    run_ok("apt-get remove $PKG, the line in <IfModule>", {env => $APT_ENV},
           @APT, 'remove', $PKG) or return;
    ok(!-e '/etc/apache2/mods-enabled/sndbuf_tune.load',
       'the prerm disabled the module');
    return run_ok('configtest passes without the module, both snippets '
                  . 'enabled', 'apache2ctl', 'configtest');
}

sub main {
    # --- 1. build ------------------------------------------------------------
    my $src = "$W/src";
    mkdir $src or die "$src: $!";
    my ($git, $files) = run({dir => $TOP}, 'git', 'ls-files', '-z', '-c',
                            '-o', '--exclude-standard');
    if ($git) {
        my @f = grep { -e "$TOP/$_" || -l "$TOP/$_" } split /\0/, $files;
        run_ok('copy of the tree (git ls-files)', {dir => $TOP},
               'cp', '--parents', '-a', '-t', $src, @f) or return;
    }
    else {
        run_ok('copy of the tree', 'cp', '-a', "$TOP/.", $src) or return;
        File::Path::remove_tree("$src/.git");
    }
    my ($built, $log) = run({dir => $src}, 'dpkg-buildpackage', '-us', '-uc',
                            '-b');
    ok($built, 'dpkg-buildpackage -us -uc -b')
        or return diag(join "\n", (split /\n/, $log)[-40 .. -1]);
    my ($deb) = grep { !/-dbgsym_/ } glob("$W/${PKG}_*.deb");
    my ($changes) = glob("$W/${PKG}_*.changes");
    ok($deb && $changes, 'the .deb and the .changes are next to the copy')
        or return diag("in $W: @{ listing($W) }");

    my ($lok, $lint) = run('lintian', '-I', '--pedantic', '--fail-on',
                           'error,warning', $changes);
    $lint =~ s/^running with root privileges is not recommended!\n//m;
    ok($lok && $lint !~ /^[EW]: /m, 'lintian -I --pedantic: no error, no '
       . 'warning') or diag($lint);
    diag("lintian:\n$lint") if $lint =~ /\S/;

    # paths in the package, and which of its directories exist already
    my (undef, $tar) = run('dpkg-deb', '-c', $deb);
    my %predir;
    for ($tar =~ m{^d\S+\s+\S+\s+\d+\s+\S+\s+\S+\s+\.(/\S*?)/?$}mg) {
        $predir{$_} = 1 if $_ ne '/' && -d $_;
    }

    # --- 2. install ----------------------------------------------------------
    mkdir "$W/stub" or die "$W/stub: $!";
    open my $stub, '>', "$W/stub/invoke-rc.d" or die "stub: $!";
    print $stub "#!/bin/sh\n",
        "# the maintainer scripts' service actions on apache2, recorded\n",
        "[ \"\$1\" = apache2 ] || exec /usr/sbin/invoke-rc.d \"\$\@\"\n",
        "echo \"\$*\" >> '$STUBLOG'\n";
    close $stub;
    chmod 0755, "$W/stub/invoke-rc.d";

    $made{package} = 1;
    my (undef, $apt) = run_ok("apt-get install $deb", {env => $APT_ENV},
                              @APT, 'install', $deb);
    like($apt, qr/\b0 upgraded, 1 newly installed, 0 to remove\b/,
         'apt-get installed this package and nothing else');
    ok(pkg_installed(), "dpkg: $PKG installed") or return;
    my (undef, $list) = run('dpkg', '-L', $PKG);
    my @paths = grep { m{^/} && $_ ne '/.' } split /\n/, $list;
    my %listed = map { $_ => 1 } @paths;
    for my $want ('/usr/lib/apache2/modules/mod_sndbuf_tune.so',
                  '/etc/apache2/mods-available/sndbuf_tune.load',
                  '/etc/apache2/mods-available/sndbuf_tune.conf',
                  "/usr/share/doc/$PKG/copyright",
                  "/usr/share/doc/$PKG/changelog.gz") {
        ok($listed{$want} && -f $want, "dpkg -L: $want");
    }
    ok((grep { m{^/usr/share/doc/\Q$PKG\E/README\.md$} } @paths)
       && (grep { m{^/usr/share/doc/\Q$PKG\E/docs/directives\.md$} } @paths)
       && !(grep { /\.md\.gz$/ } @paths),
       'dpkg -L: README.md and docs/*.md under /usr/share/doc, not compressed');
    docs_ok(grep { m{^/usr/share/doc/\Q$PKG\E/.*\.md$} } @paths);
    is((slurp('/etc/apache2/mods-available/sndbuf_tune.load') // '')
       =~ s/^#.*\n//mgr,
       "LoadModule sndbuf_tune_module "
       . "/usr/lib/apache2/modules/mod_sndbuf_tune.so\n",
       'sndbuf_tune.load loads the packaged module');
    ok(-l '/etc/apache2/mods-enabled/sndbuf_tune.load'
       && -l '/etc/apache2/mods-enabled/sndbuf_tune.conf',
       'the postinst enabled the module (apache2-maintscript-helper)');
    like(slurp($STUBLOG) // '', qr/^apache2 restart$/m,
         'the postinst asked for an apache2 restart (invoke-rc.d, recorded)');

    run_ok('a2enmod sndbuf_tune', 'a2enmod', 'sndbuf_tune') or return;
    my (undef, $mods) = run_ok('apache2ctl -M', 'apache2ctl', '-M');
    like($mods, qr/^\s*sndbuf_tune_module \(shared\)/m,
         'apache2ctl -M lists sndbuf_tune_module');

    # --- 3. serve ------------------------------------------------------------
    snippet_add($SNIPPET, "SndbufTune 64k\n") or return;
    my (undef, $ct) = run_ok('apache2ctl configtest', 'apache2ctl',
                             'configtest');
    like($ct, qr/Syntax OK/, 'configtest: Syntax OK');

    unless (-d $DOCROOT) {
        File::Path::make_path($DOCROOT);
        $made{docroot} = 1;
    }
    $made{file} = 1;
    open my $big, '>', "$DOCROOT/$FILE" or die "$DOCROOT/$FILE: $!";
    my $mb = "\x5a" x (1 << 20);
    print $big $mb for 1 .. $FILESIZE >> 20;
    close $big or die "$DOCROOT/$FILE: $!";
    chmod 0644, "$DOCROOT/$FILE";

    # a namespace left by a killed run has no processes: reuse the name
    my (undef, $nslist) = run('ip', 'netns', 'list');
    if (grep { /^\Q$NS\E\b/ } split /\n/, $nslist) {
        my (undef, $pids) = run('ip', 'netns', 'pids', $NS);
        ok($pids !~ /\d/, "namespace $NS left over, and empty") or return;
        run('ip', 'netns', 'delete', $NS);
    }
    $made{netns} = 1;
    run_ok("ip netns add $NS", 'ip', 'netns', 'add', $NS) or return;
    run_ok('lo up in the namespace', ns('ip', 'link', 'set', 'lo', 'up'))
        or return;

    for my $d (qw(run lock log)) {
        mkdir "$RUN/$d" or die "$RUN/$d: $!";
    }
    my $uid = getpwnam('www-data');
    chown $uid, -1, "$RUN/lock" if defined $uid;
    open my $ev, '>', $ENVVARS or die "$ENVVARS: $!";
    print $ev ". /etc/apache2/envvars\n",
        "export APACHE_PID_FILE=$PIDFILE\n",
        "export APACHE_RUN_DIR=$RUN/run\n",
        "export APACHE_LOCK_DIR=$RUN/lock\n",
        "export APACHE_LOG_DIR=$RUN/log\n";
    close $ev;

    $made{server} = 1;
    run_ok("apache2ctl -k start (Debian's configuration, in $NS)",
           {env => $SERVER_ENV}, ns('apache2ctl', '-k', 'start'))
        or return diag(slurp("$RUN/log/error.log") // '');
    my ($master) = poll_until($POLL, sub { my $p = pidfile_pid($PIDFILE);
                                           pid_alive($p) ? $p : () });
    ok($master, 'apache2 is running (its pid file)')
        or return diag(slurp("$RUN/log/error.log") // '');
    my ($port) = poll_until($POLL, sub {
        my (undef, $l) = run(ns('ss', '-H', '-ltn'));
        my @ports = $l =~ /:(\d+)\s+\S+:\*/g;
        return (grep { $_ == 80 } @ports) ? 80 : $ports[0];
    });
    ok($port, "apache2 listens in the namespace (port " . ($port // '-')
       . ')') or return;

    my $want = 2 * ($SIZE < wmem_max() ? $SIZE : wmem_max());
    my $c = client_start($port);
    is($c->{status}, 200, "GET /$FILE: 200") or return;
    is($c->{length}, $FILESIZE, 'Content-Length');
    my ($tb, $ss) = poll_until($POLL, sub { server_tb($port, $c->{port}) });
    diag("SndbufTune 64k, stalled: $ss") if $ss;
    is($tb, $want, "SndbufTune 64k: tb == 2 * min($SIZE, wmem_max) = $want");
    is(client_read($c, $PULL), $PULL, "the client pulled $PULL bytes");
    ($tb, $ss) = poll_until($POLL, sub { server_tb($port, $c->{port}) });
    diag("SndbufTune 64k, after the pull: $ss") if $ss;
    is($tb, $want, "tb still $want: the size is locked");
    client_quit($c);

    # control: without the line, autotuning grows the buffer past $want
    run_ok("a2disconf $SNIPPET", 'a2disconf', $SNIPPET) or return;
    my @old = server_children($master);
    run_ok('apache2ctl graceful', {env => $SERVER_ENV},
           ns('apache2ctl', 'graceful')) or return;
    # once every child of the old generation has gone, no connection can
    # reach a child that still has the line
    ok(poll_until($POLL, sub {
        my %now = map { $_ => 1 } server_children($master);
        !grep({ $now{$_} } @old) && %now;
    }), 'graceful: the old generation of children has gone') or return;

    $c = client_start($port);
    is($c->{status}, 200, 'without the line: GET 200') or return;
    ($tb, $ss) = poll_until($POLL, sub { server_tb($port, $c->{port}) });
    diag("no SndbufTune, stalled: $ss") if $ss;
  SKIP: {
        skip "tcp_wmem[2] " . tcp_wmem_max() . " <= $want: autotuning "
             . "cannot exceed the fixed size", 1 if tcp_wmem_max() <= $want;
        # pull until the kernel has grown the buffer; bounded by the file
        # and by a second of polling after each pull
        my $pulled = 0;
        while (!($tb && $tb > $want) && $pulled + $PULL < $FILESIZE) {
            my $n = client_read($c, $PULL) or last;
            $pulled += $n;
            my @v = poll_until(1, sub {
                my @v = server_tb($port, $c->{port});
                @v && $v[0] > $want ? @v : ();
            });
            ($tb, $ss) = @v ? @v : server_tb($port, $c->{port});
        }
        diag("no SndbufTune, after $pulled bytes: $ss") if $ss && $pulled;
        ok($tb && $tb > $want, "without the line tb grows past $want "
           . '(kernel autotuning): ' . ($tb // '-'));
    }
    client_quit($c);

    # --- 4. roll back --------------------------------------------------------
    ok(server_stop(), 'apache2ctl stop: the server has gone');
    delete $made{server};
    snippet_remove($SNIPPET);
    rollback_ok() or return;

    # --- 5. remove -----------------------------------------------------------
    snippet_remove($_) for $RECIPES, $BARE;
    run_ok("apt-get purge $PKG", {env => $APT_ENV}, @APT, 'purge', $PKG)
        or return;
    ok(!pkg_known(), "dpkg: $PKG purged");
    delete $made{package};
    my @left = grep { (-e $_ || -l $_) && !(-d $_ && $predir{$_}) } @paths;
    ok(!@left, 'every file and directory of the package has gone ('
       . scalar(@paths) . ' paths in dpkg -L)') or diag("left: @left");
    ok(!globbed('/etc/apache2/mods-enabled/sndbuf_tune.*')
       && !globbed('/etc/apache2/mods-available/sndbuf_tune.*'),
       'no sndbuf_tune.* in mods-enabled or mods-available');
    ok(!grep({ m{/sndbuf_tune$} } @{ tree('/var/lib/apache2') }),
       'no sndbuf_tune state under /var/lib/apache2');
}
