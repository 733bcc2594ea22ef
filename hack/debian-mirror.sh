#!/bin/sh
# debian-mirror.sh prints the Debian archive mirror apt uses on this machine:
# the first URI of an enabled "deb" source whose suite is a Debian release
# name (not a -security or -updates pocket). One-line *.list entries and
# deb822 *.sources stanzas are both read; no host is written here. It prints
# nothing when there is none.
set -eu

releases='^(buster|bullseye|bookworm|trixie|forky|sid|oldstable|stable|testing|unstable)$'
{
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		# deb [options] URI suite components...
		sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk -v re="$releases" '
			!found && $1 == "deb" && $3 ~ re { print $2; found = 1 }'
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk -v re="$releases" '
			function flush() {
				if (!found && types ~ /(^| )deb( |$)/ && enabled != "no") {
					n = split(suites, s, " ")
					for (i = 1; i <= n; i++) if (!found && s[i] ~ re) { split(uris, u, " "); print u[1]; found = 1 }
				}
				types = ""; uris = ""; suites = ""; enabled = ""
			}
			/^[ \t]*#/ { next }
			/^[ \t]*$/ { flush(); next }
			{ key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "") }
			key == "types" { types = $0 }
			key == "uris" { uris = $0 }
			key == "suites" { suites = $0 }
			key == "enabled" { enabled = tolower($0) }
			END { flush() }' "$f"
	done
} | sed -n 1p
