#!/bin/sh
# Rendered by playbooks/render-commands.yml for gpu-box: the dask-verify command line and
# environment exactly as its container runs them (container paths: /etc/dask/tls, /var/lib/dask). A GPU selection,
# which the container gets as its only devices, is CUDA_VISIBLE_DEVICES here.
exec env CUDA_VISIBLE_DEVICES=0 DASK_DASK_GPU__DATAFRAME__PARTITION_BYTES=1073741824 DASK_DASK_GPU__DATAFRAME__PARTITIONS_PER_WORKER=1 DASK_DASK_GPU__DATAFRAME__WORKERS=2 DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True DASK_DISTRIBUTED__COMM__TLS__CA_FILE=/etc/dask/tls/ca.crt DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=/etc/dask/tls/host.crt DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=/etc/dask/tls/host.key dask-gpu-verify --scheduler tls://127.0.0.1:8786 --expect-workers 2 --timeout 120 --expect-gpus 2 --json /var/lib/dask-reports/verify-latest.json --expect-host=gpu-box=2 "$@"
