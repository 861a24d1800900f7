package sim

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Model is what a simulated server is, beyond NVIDIA's mock: the facts
// the checks judge against. To be completed by the base part's owner.
type Model struct {
	Name  string
	build func() *server.Server
}

var models = map[string]Model{
	"dgxa100": {Name: "DGX A100", build: dgxa100.New},
	"dgxh100": {Name: "DGX H100", build: dgxh100.New},
	"dgxh200": {Name: "DGX H200", build: dgxh200.New},
	"dgxb200": {Name: "DGX B200", build: dgxb200.New},
}

// basePart: identity (serial, UUID, PCI bus id), count, driver, lost.
var basePart = part{name: "base"}
