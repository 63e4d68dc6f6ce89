# Sourced by scripts/run and scripts/test: installs the Debian packages named in the array `missing`
# (when it has any), without upgrading anything already installed. As root only: anyone else is
# told which packages to install, and the script stops. `$1` names the calling script in messages.
install_missing() {
    [ ${#missing[@]} -gt 0 ] || return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "$1: missing Debian packages: ${missing[*]} (install them as root: apt-get install --no-upgrade ${missing[*]}; or run this as root)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade "${missing[@]}"
}

# What building obsd and obsctl needs: the headers of SQLite (obsd's database), libcurl (cluster
# mode's etcd client, loaded only when cluster mode starts) and libmicrohttpd (`obsctl web`).
check_build_packages() {
    [ -f /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
    dpkg -s libcurl4-openssl-dev >/dev/null 2>&1 || missing+=(libcurl4-openssl-dev)
    [ -f /usr/include/microhttpd.h ] || missing+=(libmicrohttpd-dev)
}
