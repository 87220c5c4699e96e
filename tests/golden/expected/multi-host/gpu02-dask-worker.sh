#!/bin/sh
# Rendered by playbooks/render-commands.yml for gpu02: the dask-worker command line and
# environment exactly as its container runs them (container paths: /etc/dask/tls, /var/lib/dask). A GPU selection,
# which the container gets as its only devices, is CUDA_VISIBLE_DEVICES here.
exec env CUDA_VISIBLE_DEVICES=1 DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True 'DASK_DISTRIBUTED__NANNY__PRELOAD=["dask_gpu_verify.worker_ports","dask_gpu_verify.gpu_affinity"]' DASK_HEALTH_URL=http://127.0.0.1:8790/health dask cuda worker tls://127.0.0.1:8786 --host 127.0.0.1 --name gpu02 --nthreads 1 --memory-limit auto --local-directory /var/lib/dask --death-timeout 60 --dashboard-address 127.0.0.1:8790 --worker-port 9000:9003 --tls-ca-file /etc/dask/tls/ca.crt --tls-cert /etc/dask/tls/host.crt --tls-key /etc/dask/tls/host.key --device-memory-limit 0.8 --resources GPU=1 --preload dask_gpu_verify.gpu_metrics "$@"
