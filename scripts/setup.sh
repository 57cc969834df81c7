#!/bin/sh
# Installs what the package needs on Debian: LMDB's headers and library.
set -e
if ! pkg-config --exists lmdb 2>/dev/null; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq liblmdb-dev pkg-config >/dev/null
fi
