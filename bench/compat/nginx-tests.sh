#!/bin/bash
# Runs nginx's own test suite (a checkout of nginx/nginx-tests, kept outside
# this repository) against vigil and against nginx, file by file, and writes
# the table of files and assertions each passes.
#
#   bench/compat/nginx-tests.sh NGINX_TESTS OUT_DIR [file.t ...]
#
# NGINX_TESTS  the checkout (its lib/Test/Nginx.pm drives both binaries)
# OUT_DIR      created; holds table.tsv (every file), files.md (the files
#              Vigil claims, as a Markdown table), summary.md and each TAP
# file.t ...   the files to run (default: every *.t in the checkout)
#
# Environment: VIGIL_BINARY (default build/release/vigil), NGINX_BINARY
# (default /usr/sbin/nginx), JOBS (files at a time, default 2), TMO (seconds per file,
# default 120).
#
# Each file runs under "timeout", with its own TMPDIR, as user nobody when
# started as root (a root master hands its workers to nobody, who must be able
# to read the test's directory). The two binaries take turns file by file, so
# both see the same machine load. Vigil is driven as nginx is, through
# TEST_NGINX_BINARY: its -V answers in nginx's vocabulary and declares the
# nginx modules it lacks as --without-*, so their files skip.
#
# A file "claimed" by Vigil is one Vigil does not skip; summary.md counts the
# files and assertions each binary passes over those, and over all files.
# Needs perl and the Perl modules the suite uses (README.md, Dependencies).

set -u
if [ $# -lt 2 ]; then
    sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
T=$(cd "$1" && pwd) || exit 2
OUT=$2; shift 2
here=$(cd "$(dirname "$0")/../.." && pwd)
# Not VIGIL and NGINX: each server reads the variable of its name for
# inherited listening sockets.
VIGIL_BINARY=$(readlink -f "${VIGIL_BINARY:-$here/build/release/vigil}")
NGINX_BINARY=$(readlink -f "${NGINX_BINARY:-/usr/sbin/nginx}")
JOBS=${JOBS:-2}
TMO=${TMO:-120}
for b in "$VIGIL_BINARY" "$NGINX_BINARY"; do
    [ -x "$b" ] || { echo "nginx-tests.sh: $b is not an executable" >&2; exit 2; }
done
[ -f "$T/lib/Test/Nginx.pm" ] || { echo "nginx-tests.sh: $T is not an nginx-tests checkout" >&2; exit 2; }

rm -rf "$OUT"
mkdir -p "$OUT/vigil" "$OUT/nginx" "$OUT/tmp"
OUT=$(cd "$OUT" && pwd)
chmod 755 "$OUT" "$OUT/vigil" "$OUT/nginx"

if [ $# -gt 0 ]; then FILES=("$@"); else FILES=(); for f in "$T"/*.t; do FILES+=("$(basename "$f")"); done; fi

# Debian's nginx has its modules as shared objects, loaded from here.
NGINX_MODULES=
if "$NGINX_BINARY" -V 2>&1 | grep -q '=dynamic'; then NGINX_MODULES=/usr/lib/nginx/modules; fi
# The suite loads every module -V names as dynamic; one not installed stops
# nginx at start in every file, so say which package is missing first.
for m in $("$NGINX_BINARY" -V 2>&1 | tr ' ' '\n' | sed -n 's/^--with-\(.*\)=dynamic$/\1/p'); do
    case $m in mail|stream) so=ngx_${m}_module.so ;; *) so=ngx_${m}.so ;; esac
    pkg=${m%_module}; pkg=libnginx-mod-${pkg//_/-}
    [ "$m" = http_xslt_module ] && so=ngx_http_xslt_filter_module.so pkg=libnginx-mod-http-xslt-filter
    if [ ! -f "$NGINX_MODULES/$so" ]; then
        echo "nginx-tests.sh: $NGINX_MODULES/$so is missing (Debian: $pkg); nginx would not start" >&2
        exit 2
    fi
done

AS_NOBODY=
if [ "$(id -u)" = 0 ]; then AS_NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"; fi

run_one() {  # run_one vigil|nginx file.t
    local who=$1 f=$2 bin mods= d s e rc
    if [ "$who" = vigil ]; then bin=$VIGIL_BINARY; else bin=$NGINX_BINARY; mods=$NGINX_MODULES; fi
    d=$OUT/tmp/$who/$f
    mkdir -p "$d"
    [ -n "$AS_NOBODY" ] && chown 65534:65534 "$d"
    s=$(date +%s.%N)
    # shellcheck disable=SC2086  # AS_NOBODY is a command and its arguments
    (cd "$T" && TMPDIR=$d HOME=$d TEST_NGINX_LEAVE=1 TEST_NGINX_BINARY=$bin TEST_NGINX_MODULES=$mods \
        timeout -k 10 "$TMO" $AS_NOBODY perl "$f" >"$OUT/$who/$f.tap" 2>"$OUT/$who/$f.err")
    rc=$?
    e=$(date +%s.%N)
    printf '%s\t%s\t%.1f\n' "$f" "$rc" "$(echo "$e - $s" | bc)" >"$OUT/$who/$f.rc"
}
export -f run_one
export OUT T VIGIL_BINARY NGINX_BINARY NGINX_MODULES TMO AS_NOBODY

start=$(date +%s)
for f in "${FILES[@]}"; do printf 'vigil\t%s\nnginx\t%s\n' "$f" "$f"; done |
    xargs -P "$JOBS" -L 1 bash -c 'run_one "$1" "$2"' _
wall=$(( $(date +%s) - start ))

# One line per file: each binary's result and counts from its TAP.
perl - "$OUT" "$wall" "${FILES[@]}" <<'PERL'
use strict; use warnings;
my ($out, $wall, @files) = @ARGV;
sub tap {
    my ($who, $f) = @_;
    my %r = (result => 'missing', planned => 0, pass => 0, fail => 0, skip => 0, first => '');
    my ($rc) = (`cat "$out/$who/$f.rc" 2>/dev/null` =~ /\t(\d+)\t/);
    open my $fh, '<', "$out/$who/$f.tap" or return \%r;
    my ($plan, $seen, $skipall) = (undef, 0, undef);
    while (<$fh>) {
        chomp;
        if (/^1\.\.(\d+)(?:\s*#\s*(?i:skip)\S*\s*(.*))?/) { $plan = $1; $skipall = $2 // '' if $1 == 0; next; }
        next unless /^(not )?ok \d+\s*(?:- )?(.*)$/;
        my ($not, $name) = ($1, $2); $seen++;
        next if $name =~ /#\s*TODO/i;              # the suite marks it as failing on nginx too
        if ($name =~ /#\s*skip/i) { $r{skip}++; next; }
        if ($not) { $r{fail}++; $r{first} ||= $name; } else { $r{pass}++; }
    }
    $r{planned} = $plan // 0;
    my $missing = defined $plan && $plan > $seen ? $plan - $seen : 0;
    $rc //= -1;
    if (defined $skipall) { $r{result} = 'skipped'; $r{first} = $skipall; }
    elsif ($rc == 124 || $rc == 137) { $r{result} = 'timeout'; }
    elsif (!$r{fail} && !$missing && defined $plan && $rc == 0) { $r{result} = 'pass'; }
    else { $r{result} = 'fail'; $r{first} ||= "stopped after $seen of " . ($plan // '?') . " (exit $rc)"; }
    $r{first} =~ s/\t/ /g;
    return \%r;
}
open my $t, '>', "$out/table.tsv" or die;
open my $md, '>', "$out/files.md" or die;
print $md "| file | nginx | Vigil | Vigil's first failure |\n|---|---|---|---|\n";
print $t join("\t", qw/file nginx nginx_pass vigil vigil_pass planned vigil_first_failure/), "\n";
my %sum;
for my $f (@files) {
    my ($n, $v) = (tap('nginx', $f), tap('vigil', $f));
    print $t join("\t", $f, $n->{result}, $n->{pass}, $v->{result}, $v->{pass},
        $n->{planned} || $v->{planned}, $v->{result} eq 'pass' ? '' : $v->{first}), "\n";
    if ($v->{result} ne 'skipped') {
        my $cell = sub { my $x = shift; $x->{result} eq 'skipped' ? 'skipped'
            : "$x->{result} $x->{pass}/" . ($x->{planned} || '?') };
        (my $why = $v->{result} eq 'pass' ? '' : $v->{first}) =~ s/\|/\\|/g;
        print $md "| $f | ", $cell->($n), " | ", $cell->($v), " | $why |\n";
    }
    for my $scope ('all', $v->{result} eq 'skipped' ? () : 'claimed') {
        $sum{$scope}{files}++;
        for my $who (['nginx', $n], ['vigil', $v]) {
            $sum{$scope}{"$who->[0]_files"}++ if $who->[1]{result} eq 'pass';
            $sum{$scope}{"$who->[0]_asserts"} += $who->[1]{pass};
        }
    }
}
close $t;
close $md;
open my $s, '>', "$out/summary.md" or die;
print $s "| files | count | nginx: files passed | Vigil: files passed | nginx: assertions passed | Vigil: assertions passed |\n";
print $s "|---|---:|---:|---:|---:|---:|\n";
for my $scope (['claimed', 'claimed by Vigil (not skipped)'], ['all', 'all run']) {
    my $x = $sum{$scope->[0]} or next;
    printf $s "| %s | %d | %d | %d | %d | %d |\n", $scope->[1], $x->{files},
        $x->{nginx_files} // 0, $x->{vigil_files} // 0, $x->{nginx_asserts} // 0, $x->{vigil_asserts} // 0;
}
print $s "\nWall time: $wall s.\n";
close $s;
PERL
cat "$OUT/summary.md"
