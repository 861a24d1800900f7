#!/bin/sh
# gpuhc postremove. dpkg: "purge" also removes gpuhc's state and logs
# (dpkg itself removes /etc/gpuhc/gpuhc.toml, a conffile). rpm passes a
# count (0 or 1) and keeps them; nothing to do there.
set -e
case "$1" in
purge)
	rm -rf /var/lib/gpuhc /var/log/gpuhc
	;;
esac
exit 0
