#!/bin/sh
# Rendered by playbooks/render-commands.yml for gpu-box: the dask-scheduler command line and
# environment exactly as its container runs them (container paths: /etc/dask/tls, /var/lib/dask). A GPU selection,
# which the container gets as its only devices, is CUDA_VISIBLE_DEVICES here.
exec env CUDA_VISIBLE_DEVICES=0 CUPY_CACHE_DIR=/tmp/cupy DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True DASK_HEALTH_URL=http://127.0.0.1:8787/health dask scheduler --host 127.0.0.1 --port 8786,8788 --dashboard-address 127.0.0.1:8787 --protocol tls,ucx --tls-ca-file /etc/dask/tls/ca.crt --tls-cert /etc/dask/tls/host.crt --tls-key /etc/dask/tls/host.key --preload dask_gpu_verify.host_frames "$@"
