#!/bin/sh
# Rendered by playbooks/render-commands.yml for gpu-box: the dask-worker command line and
# environment exactly as its container runs them (container paths: /etc/dask/tls, /var/lib/dask). A GPU selection,
# which the container gets as its only devices, is CUDA_VISIBLE_DEVICES here.
exec env DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=False 'DASK_DISTRIBUTED__NANNY__PRELOAD=["dask_gpu_verify.worker_ports","dask_gpu_verify.gpu_affinity"]' DASK_HEALTH_URL=http://127.0.0.1:8790/health dask cuda worker ucx://127.0.0.1:8788 --host 127.0.0.1 --name gpu-box --nthreads 1 --memory-limit auto --local-directory /var/lib/dask --death-timeout 60 --dashboard-address 127.0.0.1:8790 --device-memory-limit 0.8 --resources GPU=1 --preload dask_gpu_verify.gpu_metrics --rmm-pool-size 0.5 "$@"
