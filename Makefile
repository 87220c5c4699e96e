# The README's commands. Each target does its own set-up (virtualenv, Docker daemon, base images).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
COMPOSE_CPU := docker compose -f compose.yaml -f compose.cpu.yaml

.PHONY: setup up down test lint venv images help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup: venv ## virtualenv, Docker daemon (+ buildx, compose), base images
	bash scripts/setup-docker.sh
	bash scripts/base-images.sh

up: ## main job: build the images, start the single-host stack, verify it, print how to connect
	bash scripts/compose-up.sh

down: ## stop the single-host stack and remove its containers, network and volumes
	$(COMPOSE_CPU) --profile verify down -v --remove-orphans

test: venv ## the whole test suite (what CI runs)
	bash scripts/run-tests.sh

lint: venv ## yamllint, ansible-lint, ruff and mypy
	bash scripts/lint.sh

images: ## build the scheduler and worker images with the settings in .env
	bash scripts/setup-docker.sh && bash scripts/base-images.sh && bash scripts/build-images.sh

venv: ## .venv from the pinned requirements.txt
	bash scripts/setup-venv.sh
