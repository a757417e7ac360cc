# install.sh — how the scripts install what they need, on a machine where something else may be
# installing too (a new machine's unattended upgrades hold apt's lock for a minute or more at boot).
# Sourced.
#
#   apt_get ARGS...  apt-get as root (sudo otherwise), non-interactive: waits up to APT_LOCK_WAIT
#                    seconds (300) for another apt's lock, saying so; `install` waits inside apt
#                    (DPkg::Lock::Timeout), `update` (which apt lets fail at once on a held lock) is
#                    tried again every 5 s; a failure of another kind (a download) is tried once more
#   retry CMD...     CMD, and once more after 10 s when it fails (go mod download, pip install)

APT_LOCK_WAIT=${APT_LOCK_WAIT:-300}

apt_get() {
	local sudo="" out deadline=$((SECONDS + APT_LOCK_WAIT)) again=1 said=0
	[[ $(id -u) -eq 0 ]] || sudo=sudo
	while :; do
		if out=$($sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$APT_LOCK_WAIT" \
			-o Acquire::Retries=2 "$@" 2>&1); then
			return 0
		fi
		if grep -q 'Could not get lock\|Unable to lock' <<<"$out" && ((SECONDS < deadline)); then
			if ((!said)); then
				echo "apt-get $1: another apt holds its lock ($(grep -o 'held by process [0-9]* ([^)]*)' <<<"$out" | head -1 || true)); waiting up to ${APT_LOCK_WAIT}s for it (APT_LOCK_WAIT)" >&2
				said=1
			fi
			sleep 5
			continue
		fi
		if ((again)); then
			again=0
			echo "apt-get $1 failed; trying once more in 10 s. It said: $(tail -n 2 <<<"$out")" >&2
			sleep 10
			continue
		fi
		echo "$out" >&2
		return 1
	done
}

retry() {
	"$@" && return 0
	echo "'$*' failed; trying once more in 10 s" >&2
	sleep 10
	"$@"
}
