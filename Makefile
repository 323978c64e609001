# Thin entry points over CMake/Ninja. `make demo` and `make test` work on a
# bare Debian 12 machine: they install what is missing, configure, build, run.
BUILD_DIR ?= build
PYTHON    ?= /usr/bin/python3
LLVM_DIR  ?= /usr/lib/llvm-22
JOBS      ?= $(shell nproc)
# A compiler cache, when the machine has one, makes rebuilds of other
# checkouts cheap; CI's fresh machines have none and build from scratch.
CCACHE    ?= $(shell command -v ccache 2>/dev/null)

.PHONY: all deps configure build demo test check-lit check-python clean docs

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: | deps
	cmake -S . -B $(BUILD_DIR) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Release \
	  -DMLIR_DIR=$(LLVM_DIR)/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_DIR)/bin/lit \
	  -DMLA_TEST_PYTHON=$(PYTHON) \
	  $(if $(CCACHE),-DCMAKE_CXX_COMPILER_LAUNCHER=$(CCACHE) -DCMAKE_C_COMPILER_LAUNCHER=$(CCACHE))

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	ninja -C $(BUILD_DIR) -j $(JOBS)

# The main job: verify and print the DeepSeek-V3-shaped examples.
demo: build
	@bash scripts/demo.sh $(BUILD_DIR)

check-lit: build
	ninja -C $(BUILD_DIR) check-mla

# The Python package (build/python_packages/mla) against the numpy reference.
check-python: build
	PYTHONPATH=$(BUILD_DIR)/python_packages $(PYTHON) -m pytest -q test/python

test: check-lit check-python

docs: build
	ninja -C $(BUILD_DIR) mla-doc

clean:
	rm -rf $(BUILD_DIR)
