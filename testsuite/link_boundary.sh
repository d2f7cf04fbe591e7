#!/usr/bin/env bash
# The runtime links no compiler code: no object of the runtime's static
# libraries may define or reference a symbol that the compiler's libraries
# (frontend, passes, backend) define. The forbidden names are computed from
# those libraries, so a new compiler function is covered without a list here.
#
# usage: link_boundary.sh NM --runtime LIB... --compiler LIB... [--allowed LIB...]
# (--allowed: libraries below both, e.g. support and pkgio, whose objects a
# compiler archive may carry along; their symbols are never forbidden.)
set -euo pipefail
export LC_ALL=C # one collation for sort, comm and join

nm=$1
shift
runtime=() compiler=() allowed=()
list=
for a in "$@"; do
  case $a in
  --runtime | --compiler | --allowed) list=${a#--} ;;
  *)
    case $list in
    runtime) runtime+=("$a") ;;
    compiler) compiler+=("$a") ;;
    allowed) allowed+=("$a") ;;
    *) echo "link_boundary.sh: '$a' before --runtime/--compiler/--allowed" >&2; exit 2 ;;
    esac
    ;;
  esac
done
if [ ${#runtime[@]} -eq 0 ] || [ ${#compiler[@]} -eq 0 ]; then
  echo "usage: link_boundary.sh NM --runtime LIB... --compiler LIB... [--allowed LIB...]" >&2
  exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Global symbols an archive's objects define (text, data, bss, read-only, weak, common).
defined() { "$nm" --defined-only -g "$@" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u; }

defined "${compiler[@]}" >"$tmp/compiler"
if [ ${#allowed[@]} -gt 0 ]; then defined "${allowed[@]}" >"$tmp/allowed"; else : >"$tmp/allowed"; fi
comm -23 "$tmp/compiler" "$tmp/allowed" >"$tmp/forbidden"
if [ ! -s "$tmp/forbidden" ]; then
  echo "link_boundary.sh: the compiler libraries define no symbols (wrong libraries given?)" >&2
  exit 2
fi

: >"$tmp/found"
for lib in "${runtime[@]}"; do
  # nm -A prints "archive:member:address type name", or "archive:member: U name"
  # for an undefined one (no address).
  "$nm" -A -g "$lib" 2>/dev/null | awk '
    {
      name = $NF; type = $(NF - 1)
      where = $1; sub(/:[^:]*$/, "", where); n = split(where, p, ":"); member = p[n]
      print name, member, (type == "U" ? "references" : "defines")
    }' | sort -k1,1 >"$tmp/one"
  if [ ! -s "$tmp/one" ]; then
    echo "link_boundary.sh: nm found no symbols in '$lib'" >&2
    exit 2
  fi
  cat "$tmp/one" >>"$tmp/found"
done
sort -k1,1 -o "$tmp/found" "$tmp/found"
join "$tmp/forbidden" "$tmp/found" >"$tmp/bad" || true

if [ -s "$tmp/bad" ]; then
  echo "the runtime's libraries use compiler code ($(wc -l <"$tmp/bad") symbols):"
  awk '{ print "  " $2 " " $3 " " $1 }' "$tmp/bad" | sort -u
  exit 1
fi
echo "the runtime's libraries (${runtime[*]##*/}) use none of the" \
  "$(wc -l <"$tmp/forbidden") symbols the compiler defines"
