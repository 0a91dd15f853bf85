#!/bin/sh
# Makes sure the tools the tests and the benchmark need are installed:
# redis-server (the tests and the harness start their own servers), when
# asked for with "cc", a C compiler (the clock faults build a small LD_PRELOAD
# library), and with "postgres", PostgreSQL's server (the fenced writes'
# tests start their own; found as initdb on PATH or, where Debian keeps it,
# under /usr/lib/postgresql/*/bin, or $REDLOCK_POSTGRES_LIB/*/bin). A tool that is missing is installed with the system's package
# manager (apt-get, dnf, apk or brew; through sudo when not root), saying what
# runs; where that cannot be done, the script stops with the command to run.
# With REDLOCK_NO_INSTALL=1 it never installs, only says what to run.
#
# Usage: scripts/ensure-redis.sh [redis-server] [cc] [postgres]   (default: redis-server)
#
# POSIX sh on purpose: Alpine has no bash. Only shell built-ins and the tools
# it installs with are used, so that its tests can run it with stubs alone on
# PATH.
set -eu

say() { printf 'ensure-redis: %s\n' "$*" >&2; }

[ $# -gt 0 ] || set -- redis-server

# have reports whether tool is installed.
have() {
	case $1 in
	postgres)
		command -v initdb >/dev/null 2>&1 && return 0
		for f in "${REDLOCK_POSTGRES_LIB:-/usr/lib/postgresql}"/*/bin/initdb; do
			[ -x "$f" ] && return 0
		done
		return 1
		;;
	*) command -v "$1" >/dev/null 2>&1 ;;
	esac
}

missing=
for tool in "$@"; do
	case $tool in
	redis-server | cc | postgres) ;;
	*)
		say "unknown tool \"$tool\": expected redis-server, cc or postgres"
		exit 2
		;;
	esac
	have "$tool" || missing="$missing $tool"
done

# redis_version warns when redis-server is too old for the restart guard.
redis_version() {
	v=$(redis-server --version 2>/dev/null) || return 0
	v=${v#*v=}
	v=${v%% *}
	case $v in
	[0-6].*) say "redis-server $v is older than 7.0: the restart guard and its tests need 7.0 or later" ;;
	esac
}

if [ -z "$missing" ]; then
	case " $* " in *" redis-server "*) redis_version ;; esac
	exit 0
fi

# Pick the package manager and each tool's packages for it.
os=$(uname -s 2>/dev/null || echo unknown)
pm=
if [ "$os" = Darwin ]; then
	pm=brew
else
	for p in apt-get dnf apk; do
		if command -v "$p" >/dev/null 2>&1; then
			pm=$p
			break
		fi
	done
fi

packages() { # $1 tool: the packages that provide it under $pm
	case $pm:$1 in
	apt-get:redis-server) echo redis-server ;;
	apt-get:cc) echo gcc libc6-dev ;;
	apt-get:postgres | apk:postgres) echo postgresql ;;
	dnf:redis-server | apk:redis-server | brew:redis-server) echo redis ;;
	dnf:cc) echo gcc ;;
	dnf:postgres) echo postgresql-server ;;
	apk:cc) echo gcc musl-dev ;;
	brew:postgres) echo postgresql ;;
	esac
}

pkgs=
for tool in $missing; do
	p=$(packages "$tool")
	if [ -z "$p" ]; then
		if [ "$pm:$tool" = brew:cc ]; then
			say "no C compiler (cc) found; run: xcode-select --install"
		else
			say "$tool not found, and none of apt-get, dnf, apk or brew is on PATH to install it with."
			say "install it so that $tool is on PATH; on Debian/Ubuntu: sudo apt-get install -y $(pm=apt-get packages "$tool")"
		fi
		exit 1
	fi
	pkgs="$pkgs $p"
done
pkgs=${pkgs# }

# cmds holds one command a line.
nl='
'
ifs=$IFS
case $pm in
apt-get) cmds="apt-get update${nl}apt-get install -y $pkgs" ;;
dnf) cmds="dnf install -y $pkgs" ;;
apk) cmds="apk add $pkgs" ;;
brew) cmds="brew install $pkgs" ;;
esac

# brew refuses to run as root; the others need root, or sudo.
sudo=
if [ "$pm" != brew ] && [ "$(id -u 2>/dev/null || echo unknown)" != 0 ]; then
	sudo=sudo
fi

# print_cmds prints the commands, joined by &&, each with $sudo.
print_cmds() {
	out=
	IFS=$nl
	for c in $cmds; do out="$out${out:+ && }${sudo:+$sudo }$c"; done
	IFS=$ifs
	echo "$out"
}

if [ "${REDLOCK_NO_INSTALL:-}" = 1 ]; then
	say "missing:$missing; REDLOCK_NO_INSTALL=1, so not installing. Run: $(print_cmds)"
	exit 1
fi
if [ "$pm" = brew ] && ! command -v brew >/dev/null 2>&1; then
	say "missing:$missing; Homebrew is not installed (https://brew.sh). Then run: $(print_cmds)"
	exit 1
fi
if [ -n "$sudo" ] && ! command -v sudo >/dev/null 2>&1; then
	sudo=
	say "missing:$missing; not root and no sudo, so not installing. Run as root: $(print_cmds)"
	exit 1
fi

say "missing:$missing; installing with $pm"
export DEBIAN_FRONTEND=noninteractive
IFS=$nl
for c in $cmds; do
	IFS=$ifs
	say "running: ${sudo:+$sudo }$c"
	# $c is split into words on purpose: a command and its arguments.
	# shellcheck disable=SC2086
	if ! $sudo $c; then
		say "failed: ${sudo:+$sudo }$c"
		say "run it yourself: $(print_cmds)"
		exit 1
	fi
done
IFS=$ifs

# The shell may remember that the tools were missing.
hash -r 2>/dev/null || true
for tool in $missing; do
	if ! have "$tool"; then
		say "$tool is still not on PATH after: $(print_cmds)"
		exit 1
	fi
done
say "installed:$missing"
case "$missing " in *" redis-server "*) redis_version ;; esac
