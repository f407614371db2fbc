#!/usr/bin/env bash
# Regular-expression locations and a large map: Vigil against nginx on one
# configuration file that both servers include, one worker each pinned to
# CPU 0, wrk -t1 on CPU 1 with 50 keep-alive connections, alternately: for
# each round, nginx then Vigil. Reports the medians of requests/s and of the
# server's CPU time per request.
#
#   bench/load/regex_map_vs_nginx.sh [ROUNDS [SECONDS]]   (default 3 rounds of 5 s)
#
# Environment: VIGIL (default build/release/vigil, built if missing), NGINX
# (default /usr/sbin/nginx), MAP_KEYS (default 10000), KEEP_TMP=1 keeps the
# generated files, NGINX_PCRE_JIT=1 adds "pcre_jit on;" to nginx's main
# context (nginx's default is off, its interpreter; Vigil JIT-compiles every
# expression).
#
# The configuration (http.conf in the temporary directory):
# - map $uri $mapped: MAP_KEYS exact keys "/p/N item-N" (a hash in both
#   servers), then five expressions, the last "~^/p/([0-9]+)$ p$1" catching
#   the numbers past the keys, and "default none";
# - 50 "location ~" / "~*" expressions of the kinds sites have (file
#   extensions, API routes with groups, blog and user paths), in an order
#   where the requests' URIs match only the 50th, "~ ^/p/([0-9]+)$", so every
#   request tries all 50 (and, for nginx and Vigil alike, keeps the groups of
#   the one that matched); a prefix "location /" and an exact
#   "location = /healthz" that the requests do not match;
# - the 50th answers "return 200 $mapped;" (and "add_header X-Mapped
#   $mapped;"), so the map is looked up for every request;
# - access_log off, keepalive_requests 1000, keepalive_timeout 75s.
# wrk requests eight URIs in turn (a Lua script): seven exact keys spread
# over the map, and /p/12345, which no key matches and the map's last
# expression does (one request in eight tries the five expressions and
# evaluates a value with a group). Before every round, curl checks both the
# body and the X-Mapped field of a deep key and of the expression's answer.
set -euo pipefail

ROUNDS=${1:-3}
DURATION=${2:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=common.sh
. "$ROOT/bench/load/common.sh"
VIGIL=${VIGIL:-$ROOT/build/release/vigil}
NGINX=${NGINX:-/usr/sbin/nginx}
MAP_KEYS=${MAP_KEYS:-10000}

build_vigil_if_missing
require_tools "$NGINX" wrk taskset curl
make_bench_tmp vigil_regex_map_bench
mkdir -p "$TMP/html" "$TMP/nginx/logs" "$TMP/vigil/logs" "$TMP/vigil/conf"
PORT=$(free_port)

# The 49 expressions tried (and missed) before the one the requests match.
miss_patterns() {
  cat <<'RE'
~ \.php$
~* \.(css|js|png)$
~* \.(jpe?g|gif|webp|avif|ico)$
~* \.(woff2?|ttf|otf|eot)$
~* \.(mp4|webm|ogg|mp3)$
~* \.(pdf|docx?|xlsx?|pptx?)$
~ \.(bak|old|orig|swp)$
~ /\.(git|svn|hg)(/|$)
~ ^/(wp-admin|wp-login\.php|xmlrpc\.php)
~ \.cgi$
~ ^/cgi-bin/
~* ^/favicon\.ico$
~ ^/robots\.txt$
~ ^/sitemap(_[0-9]+)?\.xml$
~ ^/blog/([0-9]{4})/([0-9]{2})/([a-z0-9-]+)/?$
~ ^/tag/([a-z0-9-]+)$
~ ^/user/([0-9]+)/avatar$
~ ^/user/([0-9]+)/settings$
~ ^/download/(?<file>[^/]+)$
~ ^/search/(.*)$
~ ^/(en|fr|de|es|it|zh|ja)/
~* ^/static/.+\.(map|json)$
~ ^/img/(\d+)x(\d+)/(.+)$
~ ^/thumbs/([a-f0-9]{2})/([a-f0-9]{32})\.jpg$
~ ^/feed(/rss|/atom)?$
~ ^/v[0-9]+/health$
RE
  local resource
  for resource in users orders products carts invoices payments sessions reviews \
      categories coupons shipments refunds; do
    echo "~ ^/api/v[0-9]+/$resource/([0-9]+)\$"
    echo "~ ^/api/v[0-9]+/$resource/([0-9]+)/(history|items|notes)\$"
  done | head -n 23
}

# The http block both servers include.
write_http_conf() {
  local n=0 line
  {
    cat <<EOF
http {
    access_log off;
    keepalive_requests 1000;
    keepalive_timeout 75s;
    map_hash_max_size $((MAP_KEYS * 2));
    map_hash_bucket_size 64;

    map \$uri \$mapped {
        default none;
EOF
    awk -v n="$MAP_KEYS" 'BEGIN {for (i = 0; i < n; i++) printf "        /p/%d item-%d;\n", i, i}'
    cat <<'EOF'
        ~^/old/(?<rest>.+)$ /new/$rest;
        ~*^/static/ static;
        ~^/api/v1/ api1;
        ~^/user/(?<id>[0-9]+)$ user-$id;
        ~^/p/([0-9]+)$ p$1;
    }

    server {
EOF
    echo "        listen 127.0.0.1:$PORT;"
    echo "        root $TMP/html;"
    echo "        location / { }"
    echo "        location = /healthz { return 204; }"
    while read -r line; do
      n=$((n + 1))
      # Quoted when it holds a brace, which would otherwise open the block.
      [[ $line == *[{}]* ]] && line="${line%% *} \"${line#* }\""
      echo "        location $line { return 404; }"
    done < <(miss_patterns)
    cat <<'EOF'
        location ~ ^/p/([0-9]+)$ {
            add_header X-Mapped $mapped;
            return 200 $mapped;
        }
    }
}
EOF
  } > "$TMP/http.conf"
  [[ $n == 49 ]] || { echo "expected 49 expressions before the last, made $n" >&2; exit 1; }
}

write_http_conf
cat > "$TMP/paths.lua" <<'EOF'
local paths = {"/p/17", "/p/1234", "/p/2500", "/p/4999", "/p/6180", "/p/7777", "/p/9999", "/p/12345"}
local requests = {}
-- Formatted once (in init, where wrk.format knows the Host), not per request.
init = function(args)
  for n, path in ipairs(paths) do requests[n] = wrk.format(nil, path) end
end
local i = 0
request = function()
  i = i % #requests + 1
  return requests[i]
end
EOF
printf '%serror_log %s error;\npid %s;\nevents { worker_connections 1024; }\ninclude %s;\n' \
  "${NGINX_PCRE_JIT:+pcre_jit on; }" "$TMP/nginx/logs/error.log" "$TMP/nginx/logs/nginx.pid" \
  "$TMP/http.conf" > "$TMP/nginx/nginx.conf"
printf 'daemon off;\nmaster_process off;\nworker_processes 1;\nerror_log %s notice;\npid %s;\nevents { worker_connections 1024; use epoll; }\ninclude %s;\n' \
  "$TMP/vigil/logs/error.log" "$TMP/vigil/logs/vigil.pid" "$TMP/http.conf" > "$TMP/vigil/conf/vigil.conf"

start_nginx() {
  start_pinned "$PORT" "$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off; master_process off;'
}
start_vigil() {
  start_pinned "$PORT" "$VIGIL" -p "$TMP/vigil" -c conf/vigil.conf
}

# expect PATH VALUE: the body and the X-Mapped field of PATH are VALUE.
expect() {
  local got
  got=$(curl -s -D "$TMP/head" "http://127.0.0.1:$PORT$1")
  local field
  field=$(awk -F': ' 'tolower($1) == "x-mapped" {sub(/\r$/, "", $2); print $2}' "$TMP/head")
  if [[ $got != "$2" || $field != "$2" ]]; then
    echo "$1: expected \"$2\", got body \"$got\", X-Mapped \"$field\"" >&2
    exit 1
  fi
}

declare -A RPS CPU
declare -A res=() cpu=()
echo "vigil: $VIGIL; nginx: $($NGINX -v 2>&1 | sed 's/.*: //')${NGINX_PCRE_JIT:+ with pcre_jit on}; $MAP_KEYS map keys; ${ROUNDS} rounds of ${DURATION}s" >&2
for r in $(seq 1 "$ROUNDS"); do
  msg="  round $r:"
  for srv in nginx vigil; do
    "start_$srv"
    expect "/p/$((MAP_KEYS - 1))" "item-$((MAP_KEYS - 1))"
    expect /p/12345 p12345
    DURATION=1 wrk_round "http://127.0.0.1:$PORT" -s "$TMP/paths.lua" >/dev/null  # warm-up
    read -r l_rps l_cpu <<<"$(wrk_round "http://127.0.0.1:$PORT" -s "$TMP/paths.lua")"
    res[$srv]+="$l_rps "
    cpu[$srv]+="$l_cpu "
    stop_server
    msg+=" $srv $l_rps req/s $l_cpu us/req;"
  done
  echo "$msg" >&2
done
for srv in nginx vigil; do
  RPS[$srv]=$(median_of "${res[$srv]}")
  CPU[$srv]=$(median_of "${cpu[$srv]}")
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0 && a > 0) printf "%.2f", a / b; else print "-"}'; }
echo
echo "| case | nginx req/s | vigil req/s | vigil/nginx | server CPU us/req (nginx / vigil) |"
echo "|---|---:|---:|---:|---:|"
echo "| 50 regex locations (the 50th matches), map of $MAP_KEYS keys + 5 expressions, return 200 \$mapped | ${RPS[nginx]} | ${RPS[vigil]} | $(ratio "${RPS[vigil]}" "${RPS[nginx]}") | ${CPU[nginx]} / ${CPU[vigil]} |"
