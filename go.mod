module github.com/gpuhc/gpuhc

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/Mellanox/rdmamap v1.1.0
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/sirupsen/logrus v1.10.2
	golang.org/x/sys v0.50.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/vishvananda/netlink v1.1.0 // indirect
	github.com/vishvananda/netns v0.0.0-20191106174202-0a2b9b5464df // indirect
)
