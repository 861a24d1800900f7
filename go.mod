module github.com/gpuhc/gpuhc

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/sirupsen/logrus v1.10.2 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
