# Sourced by the ensure-*.sh scripts: apt_install NAME PACKAGE installs Debian's
# PACKAGE with apt-get (through sudo when not root), quietly, printing apt's output
# and failing only when the install fails. NAME prefixes the messages.
apt_install() {
	local name=$1 package=$2 sudo="" log
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null; then
			echo "$name: $package is not installed and this is not root; install the $package package" >&2
			return 1
		fi
		sudo="sudo"
	fi
	log=$(mktemp)
	if ! { DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$package"; } >"$log" 2>&1; then
		echo "$name: installing $package failed:" >&2
		cat "$log" >&2
		rm -f "$log"
		return 1
	fi
	rm -f "$log"
}
