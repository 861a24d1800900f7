package xid

// This file is NVIDIA's XID catalogue, one row per code, as data.
//
// Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (table
// "Xids", and its downloadable spreadsheet "Xid Catalog Reference", sheet
// "Catalog"), https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html
// (the page for Ampere and newer GPUs; see also "Xid Errors",
// https://docs.nvidia.com/deploy/xid-errors/index.html).
//
// Version: the spreadsheet as mirrored by leptonai/gpud in
// components/accelerator/nvidia/xid/catalog_generated.go ("Generated at
// 2025-10-29T00:35:32Z", added in gpud commit a3af5033, read at commit
// 4a8de33a). NVIDIA's page carries no version number of its own; the
// mirror's generation date is the catalogue's date here. Only the data
// was carried over: code, mnemonic, description and both resolution
// buckets, word for word except that line breaks inside a cell are
// spaces. Codes 162 to 172 have no resolution bucket in that version of
// the catalogue (NotListed).
//
// Editing a row changes what gpuhc drains: catalog_test.go pins every
// row, so a change must be made in both places, from a newer catalogue.

// Bucket is one of the catalogue's resolution buckets ("Resolution Bucket
// (Immediate Action)"), as NVIDIA spells it.
type Bucket string

// The immediate actions the catalogue uses.
const (
	RestartBM          Bucket = "RESTART_BM"  // restart the bare-metal node
	ResetGPU           Bucket = "RESET_GPU"   // reset the GPU
	RestartApp         Bucket = "RESTART_APP" // restart the application
	RestartVM          Bucket = "RESTART_VM"  // restart the (confidential computing) VM
	IgnoreBucket       Bucket = "IGNORE"      // nothing to do
	ContactSupport     Bucket = "CONTACT_SUPPORT"
	CheckMechanicals   Bucket = "CHECK_MECHANICALS" // cabling, seating, power
	CheckUVM           Bucket = "CHECK_UVM"
	UpdateSWFW         Bucket = "UPDATE_SWFW" // update software / firmware
	WorkflowXID45      Bucket = "WORKFLOW_XID_45"
	WorkflowXID48      Bucket = "WORKFLOW_XID_48"
	WorkflowNVLinkErr  Bucket = "WORKFLOW_NVLINK_ERR"  // XID 74
	WorkflowNVLink5Err Bucket = "WORKFLOW_NVLINK5_ERR" // XIDs 144 to 150
	WorkflowXID154     Bucket = "XID_154"
	// XID154Eval is the NVLink5 decode table's "XID_154_EVAL": the
	// driver decides, and says so with an XID 154.
	XID154Eval Bucket = "XID_154_EVAL"
	// NotListed: the catalogue names the code but gives no action.
	NotListed Bucket = ""
)

// Entry is one row of the catalogue.
type Entry struct {
	Code          int
	Mnemonic      string
	Description   string // "Unused" for codes no current GPU logs
	Immediate     Bucket
	Investigatory string // the investigatory action, free text as NVIDIA writes it
}

// Used reports whether NVIDIA lists the code as logged by some GPU.
func (e Entry) Used() bool { return e.Description != "Unused" }

// Lookup returns the catalogue's row for code x.
func Lookup(x int) (Entry, bool) {
	if x < 1 || x > len(catalog) {
		return Entry{}, false
	}
	return catalog[x-1], true
}

// Catalog returns a copy of every row, in code order.
func Catalog() []Entry { return append([]Entry(nil), catalog...) }

// catalog is indexed by code-1: the catalogue lists every code from 1 to
// its last without a gap (catalog_test.go checks).
var catalog = []Entry{
	{1, "ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "Unused", ContactSupport, ""},
	{2, "ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "Unused", ContactSupport, ""},
	{3, "ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "Unused", ContactSupport, ""},
	{4, "ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "Unused", ContactSupport, ""},
	{5, "ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "Unused", ContactSupport, ""},
	{6, "ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "Unused", ContactSupport, ""},
	{7, "ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "Unused", ContactSupport, ""},
	{8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", RestartApp, "CONTACT_SUPPORT"},
	{9, "ROBUST_CHANNEL_GR_ERROR_INSTANCE", "Unused", ContactSupport, ""},
	{10, "ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "Unused", ContactSupport, ""},
	{11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "Invalid or corrupted push buffer stream", RestartApp, "CHECK_APP/CUDA"},
	{12, "ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "Unused", ContactSupport, ""},
	{13, "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY", "Graphics Engine Exception", RestartApp, "WORKFLOW_XID_13"},
	{14, "ROBUST_CHANNEL_FAKE_ERROR", "Unused", IgnoreBucket, "CONTACT_SUPPORT"},
	{15, "ROBUST_CHANNEL_SCANLINE_TIMEOUT", "Unused", ContactSupport, ""},
	{16, "ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "Unused", ContactSupport, "CONTACT_SUPPORT"},
	{17, "ROBUST_CHANNEL_PARAMETER_ERROR", "Unused", ContactSupport, ""},
	{18, "ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "Unused", ContactSupport, ""},
	{19, "ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "Unused", ContactSupport, ""},
	{20, "ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "Unused", ContactSupport, ""},
	{21, "ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "Unused", ContactSupport, ""},
	{22, "ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "Unused", ContactSupport, ""},
	{23, "ROBUST_CHANNEL_RC_LOGGING_ENABLED", "Unused", ContactSupport, ""},
	{24, "ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "Unused", ContactSupport, ""},
	{25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "Invalid or illegal push buffer stream", RestartApp, "CHECK_APP/CUDA"},
	{26, "ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "Unused", ContactSupport, ""},
	{27, "ROBUST_CHANNEL_VP_ERROR", "Unused", ContactSupport, ""},
	{28, "ROBUST_CHANNEL_VP2_ERROR", "Unused", ContactSupport, ""},
	{29, "ROBUST_CHANNEL_BSP_ERROR", "Unused", ContactSupport, ""},
	{30, "ROBUST_CHANNEL_BAD_ADDR_ACCESS", "Unused", ContactSupport, ""},
	{31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", RestartApp, "WORKFLOW_XID_31"},
	{32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", RestartApp, "CHECK_APP/CUDA"},
	{33, "ROBUST_CHANNEL_SEC_ERROR", "Unused", ContactSupport, ""},
	{34, "ROBUST_CHANNEL_MSVLD_ERROR", "Unused", ContactSupport, ""},
	{35, "ROBUST_CHANNEL_MSPDEC_ERROR", "Unused", ContactSupport, ""},
	{36, "ROBUST_CHANNEL_MSPPP_ERROR", "Unused", ContactSupport, ""},
	{37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "Driver firmware error", IgnoreBucket, "CHECK_APP/CUDA"},
	{38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", IgnoreBucket, "CONTACT_SUPPORT"},
	{39, "ROBUST_CHANNEL_CE0_ERROR", "Copy Engine Exception", RestartApp, "CONTACT_SUPPORT"},
	{40, "ROBUST_CHANNEL_CE1_ERROR", "Copy Engine Exception", RestartApp, "CONTACT_SUPPORT"},
	{41, "ROBUST_CHANNEL_CE2_ERROR", "Copy Engine Exception", RestartApp, "CONTACT_SUPPORT"},
	{42, "ROBUST_CHANNEL_VIC_ERROR", "Unused", ContactSupport, ""},
	{43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", IgnoreBucket, "CONTACT_SUPPORT"},
	{44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch", IgnoreBucket, "CONTACT_SUPPORT"},
	{45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda applications and hitting a DBE", WorkflowXID45, "Solo: RESTART_FM Not Solo: IGNORE (follow other Xid)"},
	{46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", ResetGPU, "CONTACT_SUPPORT"},
	{47, "ROBUST_CHANNEL_NVENC0_ERROR", "Unused", ContactSupport, ""},
	{48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", WorkflowXID48, "WORKFLOW_XID_48"},
	{49, "SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "Unused", ContactSupport, ""},
	{50, "SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "Unused", ContactSupport, ""},
	{51, "SILENT_RUNNING_STRESS_TEST_FAILURE", "Unused", ContactSupport, ""},
	{52, "SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "Unused", ContactSupport, ""},
	{53, "SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "Unused", ContactSupport, ""},
	{54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "Auxiliary power is not connected to the GPU board", CheckMechanicals, "CONTACT_SUPPORT"},
	{55, "SILENT_RUNNING_TEMPERATURE_READ_ERROR", "Unused", ContactSupport, ""},
	{56, "DISPLAY_CHANNEL_EXCEPTION", "Unused", ContactSupport, ""},
	{57, "FB_LINK_TRAINING_FAILURE_ERROR", "Unused", ContactSupport, ""},
	{58, "FB_MEMORY_ERROR", "Unused", ContactSupport, ""},
	{59, "PMU_ERROR", "Unused", ContactSupport, ""},
	{60, "ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", RestartApp, "INVESTIGATE_SW"},
	{61, "PMU_BREAKPOINT", "Unused", ContactSupport, ""},
	{62, "PMU_HALT_ERROR", "Internal micro-controller halt (newer drivers)", ResetGPU, "CONTACT_SUPPORT"},
	{63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", IgnoreBucket, "IGNORE"},
	{64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", ResetGPU, "CONTACT_SUPPORT"},
	{65, "ROBUST_CHANNEL_NVENC1_ERROR", "Unused", ContactSupport, ""},
	{66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "Illegal access by driver", IgnoreBucket, "INVESTIGATE_SW"},
	{67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", IgnoreBucket, "CONTACT_SUPPORT"},
	{68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", RestartApp, "CONTACT_SUPPORT"},
	{69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", RestartApp, "CHECK_APP/CUDA"},
	{70, "ROBUST_CHANNEL_CE3_ERROR", "CE3: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{71, "ROBUST_CHANNEL_CE4_ERROR", "CE4: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{72, "ROBUST_CHANNEL_CE5_ERROR", "CE5: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{73, "ROBUST_CHANNEL_NVENC2_ERROR", "Unused", ContactSupport, ""},
	{74, "NVLINK_ERROR", "NVLINK Error", WorkflowNVLinkErr, "CONTACT_SUPPORT"},
	{75, "ROBUST_CHANNEL_CE6_ERROR", "CE6: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{76, "ROBUST_CHANNEL_CE7_ERROR", "CE7: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{77, "ROBUST_CHANNEL_CE8_ERROR", "CE8: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{78, "VGPU_START_ERROR", "vGPU Start Error", UpdateSWFW, "UPDATE_SWFW"},
	{79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", RestartBM, "CONTACT_SUPPORT"},
	{80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", RestartApp, "CHECK_APP/CUDA"},
	{81, "ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "Unused", ContactSupport, ""},
	{82, "ROBUST_CHANNEL_NVJPG0_ERROR", "NVJPG0 Error", RestartApp, "CONTACT_SUPPORT"},
	{83, "ROBUST_CHANNEL_NVDEC1_ERROR", "NVDEC1 Error", RestartApp, "CONTACT_SUPPORT"},
	{84, "ROBUST_CHANNEL_NVDEC2_ERROR", "NVDEC2 Error", RestartApp, "CONTACT_SUPPORT"},
	{85, "ROBUST_CHANNEL_CE9_ERROR", "CE9: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{86, "ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", RestartApp, "CONTACT_SUPPORT"},
	{87, "NVTELEMETRY_DRIVER_REPORT", "Unused", ContactSupport, ""},
	{88, "ROBUST_CHANNEL_NVDEC3_ERROR", "NVDEC3 Error", RestartApp, "CONTACT_SUPPORT"},
	{89, "ROBUST_CHANNEL_NVDEC4_ERROR", "NVDEC4 Error", RestartApp, "CONTACT_SUPPORT"},
	{90, "LTC_ERROR", "Unused", ContactSupport, ""},
	{91, "RESERVED_XID", "Unused", ContactSupport, ""},
	{92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", IgnoreBucket, "CONTACT_SUPPORT"},
	{93, "INFOROM_ERASE_LIMIT_EXCEEDED", "Non-fatal violation of provisioned InfoROM wear limit", IgnoreBucket, "CONTACT_SUPPORT"},
	{94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", RestartApp, "IGNORE (sympathetic)"},
	{95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", ResetGPU, "IGNORE (sympathetic)"},
	{96, "ROBUST_CHANNEL_NVDEC5_ERROR", "NVDEC5 Error", RestartApp, "CONTACT_SUPPORT"},
	{97, "ROBUST_CHANNEL_NVDEC6_ERROR", "NVDEC6 Error", RestartApp, "CONTACT_SUPPORT"},
	{98, "ROBUST_CHANNEL_NVDEC7_ERROR", "NVDEC7 Error", RestartApp, "CONTACT_SUPPORT"},
	{99, "ROBUST_CHANNEL_NVJPG1_ERROR", "NVJPG1 Error", RestartApp, "CONTACT_SUPPORT"},
	{100, "ROBUST_CHANNEL_NVJPG2_ERROR", "NVJPG2 Error", RestartApp, "CONTACT_SUPPORT"},
	{101, "ROBUST_CHANNEL_NVJPG3_ERROR", "NVJPG3 Error", RestartApp, "CONTACT_SUPPORT"},
	{102, "ROBUST_CHANNEL_NVJPG4_ERROR", "NVJPG4 Error", RestartApp, "CONTACT_SUPPORT"},
	{103, "ROBUST_CHANNEL_NVJPG5_ERROR", "NVJPG5 Error", RestartApp, "CONTACT_SUPPORT"},
	{104, "ROBUST_CHANNEL_NVJPG6_ERROR", "NVJPG6 Error", RestartApp, "CONTACT_SUPPORT"},
	{105, "ROBUST_CHANNEL_NVJPG7_ERROR", "NVJPG7 Error", RestartApp, "CONTACT_SUPPORT"},
	{106, "SMBPBI_TEST_MESSAGE", "SMBPBI Test Message", IgnoreBucket, "IGNORE"},
	{107, "SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI Test Message Silent", IgnoreBucket, "IGNORE"},
	{108, "NVLINK_REMOTE_TRANSLATION_ERROR", "Unused", IgnoreBucket, "XID_137_FLOW"},
	{109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", ResetGPU, "CONTACT_SUPPORT"},
	{110, "SEC_FAULT_ERROR", "Security Fault Error", ResetGPU, "INVESTIGATE_SW"},
	{111, "BUNDLE_ERROR_EVENT", "Unused", ContactSupport, ""},
	{112, "DISP_SUPERVISOR_ERROR", "Unused", ContactSupport, ""},
	{113, "DP_LT_FAILURE", "Unused", ContactSupport, ""},
	{114, "HEAD_RG_UNDERFLOW", "Unused", ContactSupport, ""},
	{115, "CORE_CHANNEL_REGS", "Unused", ContactSupport, ""},
	{116, "WINDOW_CHANNEL_REGS", "Unused", ContactSupport, ""},
	{117, "CURSOR_CHANNEL_REGS", "Unused", ContactSupport, ""},
	{118, "HEAD_REGS", "Unused", ContactSupport, ""},
	{119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", ResetGPU, "INVESTIGATE_SW"},
	{120, "GSP_ERROR", "GSP Error", ResetGPU, "INVESTIGATE_SW"},
	{121, "C2C_ERROR", "C2C Error", IgnoreBucket, "CONTACT_SUPPORT"},
	{122, "SPI_PMU_RPC_READ_FAIL", "Unused", ContactSupport, ""},
	{123, "SPI_PMU_RPC_WRITE_FAIL", "Unused", ContactSupport, ""},
	{124, "SPI_PMU_RPC_ERASE_FAIL", "Unused", ContactSupport, ""},
	{125, "INFOROM_FS_ERROR", "Unused", ContactSupport, ""},
	{126, "ROBUST_CHANNEL_CE10_ERROR", "CE10: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{127, "ROBUST_CHANNEL_CE11_ERROR", "CE11: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{128, "ROBUST_CHANNEL_CE12_ERROR", "CE12: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{129, "ROBUST_CHANNEL_CE13_ERROR", "CE13: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{130, "ROBUST_CHANNEL_CE14_ERROR", "CE14: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{131, "ROBUST_CHANNEL_CE15_ERROR", "CE15: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{132, "ROBUST_CHANNEL_CE16_ERROR", "CE16: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{133, "ROBUST_CHANNEL_CE17_ERROR", "CE17: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{134, "ROBUST_CHANNEL_CE18_ERROR", "CE18: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{135, "ROBUST_CHANNEL_CE19_ERROR", "CE19: Unknown Error", RestartApp, "CONTACT_SUPPORT"},
	{136, "ALI_TRAINING_FAIL", "Link Training Failed", ResetGPU, "INVESTIGATE_LINK_SI"},
	{137, "NVLINK_PRIV_ERR", "NVLink Privilege Error", IgnoreBucket, "XID_137_FLOW"},
	{138, "ROBUST_CHANNEL_DLA_ERROR", "Unused", ContactSupport, ""},
	{139, "ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", RestartApp, "CONTACT_SUPPORT"},
	{140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", ResetGPU, "CONTACT_SUPPORT"},
	{141, "ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA Fast Path Error", IgnoreBucket, "CONTACT_SUPPORT"},
	{142, "ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 Error", ContactSupport, ""},
	{143, "GPU_INIT_ERROR", "GPU Initialization Error", ResetGPU, "CONTACT_SUPPORT"},
	{144, "NVLINK_SAW_ERROR", "NVLINK: SAW Error", WorkflowNVLink5Err, "WORKFLOW_NVLINK5_ERR"},
	{145, "NVLINK_RLW_ERROR", "NVLINK: RLW Error", WorkflowNVLink5Err, "WORKFLOW_NVLINK5_ERR"},
	{146, "NVLINK_TLW_ERROR", "NVLINK: TLW Error", WorkflowNVLink5Err, "WORKFLOW_NVLINK5_ERR"},
	{147, "NVLINK_TREX_ERROR", "NVLINK: TREX Error", WorkflowNVLink5Err, "WORKFLOW_NVLINK5_ERR"},
	{148, "NVLINK_NVLPW_CTRL_ERROR", "NVLINK: NVLPW_CTRL Error", WorkflowNVLink5Err, "WORKFLOW_NVLINK5_ERR"},
	{149, "NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", WorkflowNVLink5Err, "WORKFLOW_NVLINK5_ERR"},
	{150, "NVLINK_MSE_ERROR", "NVLINK: MSE Error", WorkflowNVLink5Err, "WORKFLOW_NVLINK5_ERR"},
	{151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", RestartVM, "CONTACT_SUPPORT"},
	{152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU Error", IgnoreBucket, "CONTACT_SUPPORT"},
	{153, "ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout Error", IgnoreBucket, "CONTACT_SUPPORT"},
	{154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", WorkflowXID154, "N/A Informational only regarding another Xid"},
	{155, "NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error", ResetGPU, "INVESTIGATE_SW_USER"},
	{156, "RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", ResetGPU, "IGNORE"},
	{157, "RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", IgnoreBucket, "CONTACT_SUPPORT"},
	{158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", ResetGPU, "CONTACT_SUPPORT"},
	{159, "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI Non-Data Error", CheckUVM, "SYMPATHETIC_REPORT_SOLO"},
	{160, "CHANNEL_RETIREMENT_EVENT", "Channel Retirement Event", IgnoreBucket, "INVESTIGATE_SW"},
	{161, "CHANNEL_RETIREMENT_FAILURE", "Channel Retirement Failure", IgnoreBucket, "INVESTIGATE_SW"},
	{162, "PSHC_REENGAGED", "Power Smoothing HW Circuitry capability reengaged", NotListed, ""},
	{163, "PSHC_DISENGAGED", "Power Smoothing HW Circuitry capability disengaged", NotListed, ""},
	{164, "PSHC_LOW_LIFETIME", "Power Smoothing HW Circuitry low lifetime reached", NotListed, ""},
	{165, "PSHC_ZERO_LIFETIME", "Power Smoothing HW Circuitry lifetime exhausted", NotListed, ""},
	{166, "NVLINK_SECURE_CRYPTO_ERR", "CC traffic seen prior to link properly being configured for encrypted traffic", NotListed, ""},
	{167, "PCIE_FATAL_TIMEOUT", "PCIE_FATAL_TIMEOUT", NotListed, ""},
	{168, "REDUCED_GPU_MEMORY_CAPACITY", "Errors found in WPR (write protected region)", NotListed, ""},
	{169, "SEC2_HALT_ERROR", "Internal micro-controller halt", NotListed, ""},
	{170, "NVLINK_SECURE_OTHER", "Interrupt seen in CC mode", NotListed, ""},
	{171, "UNCORRECTABLE_DRAM_ERROR", "Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM", NotListed, ""},
	{172, "UNCORRECTABLE_SRAM_ERROR", "Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM", NotListed, ""},
}
