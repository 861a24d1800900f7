module github.com/gpuhc/gpuhc

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/sirupsen/logrus v1.10.2
	golang.org/x/sys v0.50.0
)

require github.com/google/uuid v1.6.0 // indirect
