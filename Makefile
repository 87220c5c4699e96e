# The README's commands. Each target does its own set-up (virtualenv, Docker daemon, base images).
SHELL := /bin/bash
COMPOSE_CPU := docker compose -f compose.yaml -f compose.cpu.yaml

.PHONY: help setup up down test check lint images venv compose-up compose-down readme-vars

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup: venv ## virtualenv, Docker daemon (+ buildx, compose, skopeo), base images
	bash scripts/setup-docker.sh
	bash scripts/base-images.sh

up: ## main job: a 3-host sandbox deployed with site.yml, verified with playbooks/verify.yml
	bash scripts/sandbox.sh up

down: ## remove the sandbox hosts
	bash scripts/sandbox.sh down

test: venv ## the whole test suite (what CI runs)
	bash scripts/run-tests.sh

lint: venv ## yamllint, ansible-lint (production), ruff, mypy
	bash scripts/lint.sh

check: venv ## before a commit: lint and the fast tests (the model, the checks, the modules; no Docker, no sandbox)
	bash scripts/lint.sh
	.venv/bin/python -m pytest -q -n 2 -p no:cacheprovider tests/unit tests/model

images: ## build the scheduler and worker images with the settings in .env
	bash scripts/setup-docker.sh && bash scripts/base-images.sh && bash scripts/build-images.sh

compose-up: ## single host: build, start the compose stack (GPU, or CPU without GPUs), verify it
	bash scripts/compose-up.sh

compose-down: ## stop the compose stack, remove its containers, network and volumes
	$(COMPOSE_CPU) --profile verify down -v --remove-orphans

readme-vars: venv ## regenerate docs/variables.md's tables from the roles' argument specs
	.venv/bin/python scripts/readme-vars.py

venv: ## .venv from the pinned requirements.txt
	bash scripts/setup-venv.sh
