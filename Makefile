# atomcube: every target sets up .venv on first use (pip only; see README).
#   make sim       cocotb regression of every block, summary table  (SIM=icarus WAVES=1 SEED=n)
#   make test      the whole pytest suite (model, gateware, cocotb on both simulators)
#   make verilog   every block's Verilog into build/verilog/
#   make lint      ruff, the work-history scan of source and docs, and verilator --lint-only
#                  on the emitted Verilog
#   make regs      regenerate docs/registers/ (Markdown maps and C headers)
#   make ip        every block as a standalone core in build/ip/<core>/: Verilog with AXI
#                  port names and Vivado's interface attributes, C headers, a JSON record
#                  (CORE=dma SET="data_width=128 max_burst=32": one core, other parameters;
#                  docs/integration.md)
#   make bench     hardware benchmarks: cycles counted in simulation (LUT unit throughput,
#                  sparse decompressor density sweep, DMA bus utilisation; QUICK=1: the
#                  DMA at 64 KiB only)
#   make synth     each block alone through Yosys and nextpnr (ECP5-85F, iCE40 UP5K): LUT4s,
#                  flip-flops, block RAMs, multipliers, Fmax (FAMILY=ecp5|ice40 BLOCK=name;
#                  MAPPER=abc: the classic ABC, ECP5 only (both take minutes);
#                  the sparse decompressor's ECP5 builds use it by default; PNR_SEED=n:
#                  nextpnr's placement seed, ECP5 only, 0 for nextpnr's own)
#   make report    the same, written to docs/resources.md, and each block's cells by
#                  component (make area) written to docs/area.md
#   make equiv     prove the working tree's gateware the same circuit as git revision REF
#                  (default HEAD), block by block, with Yosys (BLOCK=name for one)
#   make area      ECP5 cells (LUT4, FF, LUT RAM, block RAM, multipliers) by component of
#                  each block, from Yosys with the hierarchy kept (BLOCK=name)
#   make bitstream a board's bitstream: the SoC on its pins (BOARD=ulx3s|icebreaker,
#                  BLOCKS=lut to build with only some blocks, convert among them for the
#                  DMA's conversion stage (BLOCKS=dma,sparse,lut: without it); MAPPER=abc|abc9,
#                  ROUTER=router1|router2 override the board's own choices; TRIES=n: how
#                  many placements to try when routing or placing fails, 3;
#                  PNR_SEED=n: the first placement's nextpnr seed, 0 for nextpnr's own;
#                  SWEEP=n: place with n seeds, keep the fastest and print their median
#                  (JOBS=n of them at once; auto: one per core); SEEDS=2,4,5,6:
#                  a sweep over exactly those seeds, to compare netlists; SLOW=ns: count,
#                  by module, the endpoints later than ns after the clock; TIMING_WEIGHT=n:
#                  the placer's weight on critical nets (ULX3S: 100); TARGET_MHZ=95,90:
#                  place and route at each rate in turn, rerouting the nets that fail it,
#                  until one routes, then at the board's clock (ECP5); OUT=dir: build
#                  there instead of build/bitstream/<board>/, so two builds can run at once;
#                  PLACE_ONLY=1: synthesise and place, no routing or bitstream; the full
#                  ULX3S SoC takes 20 to 30 minutes a placement)
#   make formal    formal proofs of the handshakes (SymbiYosys and Yices from PyPI): stream
#                  primitives against an ideal queue, the register bank as an AXI4-Lite
#                  subordinate, the AXI4 managers' bursts (PROOFS="skid regbank": only those)
#   make bench-model  model benchmarks: LUT fitting accuracy (integer and FP16) against
#                     NVDLA's own tables,
#                     weight layout and compression speed (per NVDLA configuration, and
#                     the whole `atomcube net` flow), activation layout speed

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
SIM    ?= verilator
JOBS   ?= auto
export SIM WAVES SEED

.PHONY: help setup setup-fpga sim test verilog lint regs ip bench bench-model formal synth report area equiv \
        bitstream clean distclean

help:
	@sed -n '2,/^[^#]/{/^#/s/^# //p}' Makefile

# Reinstall only when pyproject.toml changes. The pretrained networks the tests and README run
# through `atomcube net` (ppocr-cls, ppocr-det: docs/net.md) are ONNX files inside the
# rapidocr-onnxruntime wheel; only the files are read, so none of its runtime (onnxruntime,
# OpenCV) is installed.
$(STAMP): pyproject.toml
	@test -x $(PY) || { echo "creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[sim]'
	$(PY) -m pip install --quiet --no-deps 'rapidocr-onnxruntime==1.4.4'
	@touch $@

setup: $(STAMP)

# The FPGA tools (YoWASP Yosys and nextpnr, about 200 MB): only the FPGA targets need them.
FPGA_STAMP := $(VENV)/.installed-fpga
$(FPGA_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[sim,fpga]'
	@touch $@

setup-fpga: $(FPGA_STAMP)

SYNTH_ARGS = $(if $(FAMILY),--family $(FAMILY)) $(if $(BLOCK),--block $(BLOCK)) \
             $(if $(MAPPER),--mapper $(MAPPER)) $(if $(PNR_SEED),--seed $(PNR_SEED))
synth: $(FPGA_STAMP)
	$(PY) -m atomcube.hw.synth $(SYNTH_ARGS)

REPORT_SEEDS ?= 1,2,3
report: $(FPGA_STAMP)
	$(PY) -m atomcube.hw.synth $(SYNTH_ARGS) --seeds $(REPORT_SEEDS) --report
	$(PY) -m atomcube.hw.area $(if $(BLOCK),--block $(BLOCK)) --report

area: $(FPGA_STAMP)
	$(PY) -m atomcube.hw.area $(if $(BLOCK),--block $(BLOCK))

REF ?= HEAD
equiv: $(FPGA_STAMP)
	$(PY) -m atomcube.hw.equiv $(REF) $(if $(BLOCK),--block $(BLOCK))

BOARD ?= ulx3s
bitstream: $(FPGA_STAMP)
	$(PY) -m atomcube.hw.bitstream --board $(BOARD) $(if $(BLOCKS),--blocks $(BLOCKS)) \
	  $(if $(MAPPER),--mapper $(MAPPER)) $(if $(ROUTER),--router $(ROUTER)) \
	  $(if $(TRIES),--tries $(TRIES)) $(if $(PNR_SEED),--seed $(PNR_SEED)) \
	  $(if $(SWEEP),--sweep $(SWEEP) --jobs $(JOBS)) \
	  $(if $(SEEDS),--seeds $(SEEDS) --jobs $(JOBS)) $(if $(SLOW),--slow-endpoints $(SLOW)) \
	  $(if $(TIMING_WEIGHT),--timing-weight $(TIMING_WEIGHT)) \
	  $(if $(TARGET_MHZ),--target-mhz $(TARGET_MHZ)) $(if $(OUT),--out $(OUT)) \
	  $(if $(filter 1,$(PLACE_ONLY)),--place-only)

sim: $(STAMP)
	$(PY) -m atomcube.sim --simulator $(SIM)

# worksteal: a worker that runs out of tests takes half of another's queue, so the long nodes
# (the iCEBreaker bitstream, 2 to 15 minutes; the Icarus benches) don't leave a core idle behind
# them (with xdist's default split, a CI run took 26 minutes of pytest for 32 of CPU on 2 cores)
# --durations: the slowest tests close every run's output, so a run that got slower says where
test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --dist worksteal --durations=15

verilog: $(STAMP)
	$(PY) -m atomcube.hw.catalog build/verilog

# Verilator's lint on Amaranth's output: -Wall, less what generated Verilog always raises
# (sim/lint.py's WAIVED names each waived warning with its reason).
lint: verilog
	$(VENV)/bin/ruff check hw model sim tests examples
	$(PY) tests/history_scan.py
	@for f in build/verilog/*.v; do \
	  echo "verilator --lint-only $$f"; \
	  $(PY) -m atomcube.sim.lint $$f || exit 1; \
	done

regs: $(STAMP)
	$(VENV)/bin/atomcube regs --out docs/registers

ip: $(STAMP)
	$(PY) -m atomcube.hw.ip $(if $(CORE),--core $(CORE)) $(foreach s,$(SET),--set $(s))

formal: $(FPGA_STAMP)
	$(PY) -m atomcube.sim.formal --jobs $(if $(filter auto,$(JOBS)),$$(nproc),$(JOBS)) $(PROOFS)

bench: $(STAMP)
	$(PY) -m atomcube.sim.bench $(if $(filter 1,$(QUICK)),--quick)

# every benchmark runs, and the target fails at the end if one missed its goal
bench-model: $(STAMP)
	@status=0; \
	$(PY) -m atomcube.model.nvdla.lut_bench || status=1; \
	$(PY) -m atomcube.model.nvdla.weights_bench || status=1; \
	$(PY) -m atomcube.model.layout_bench || status=1; \
	exit $$status

clean:
	rm -rf build sim_build .pytest_cache

distclean: clean
	rm -rf $(VENV)
