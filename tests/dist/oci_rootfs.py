#!/usr/bin/env python3
"""Exports the root filesystem of a single-image OCI archive (as `buildah push oci-archive:`
writes it) and prints the image's config as JSON.

    oci_rootfs.py ARCHIVE ROOTFS

Reads index.json, its manifest, the config and the layers in order (gzip, zstd-less: the
layer types buildah writes), applying each layer over ROOTFS with owners and modes kept (run as
root). Whiteouts are not handled: an image FROM scratch with COPY steps has none, and one is
refused rather than applied wrongly.
"""

import json
import sys
import tarfile

LAYER_TYPES = (
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
)


def blob(archive, digest):
    algo, hexdigest = digest.split(":", 1)
    return archive.extractfile(f"blobs/{algo}/{hexdigest}")


def main(path, rootfs):
    with tarfile.open(path) as archive:
        index = json.load(archive.extractfile("index.json"))
        (manifest_desc,) = index["manifests"]
        manifest = json.load(blob(archive, manifest_desc["digest"]))
        config = json.load(blob(archive, manifest["config"]["digest"]))
        for layer in manifest["layers"]:
            if layer["mediaType"] not in LAYER_TYPES:
                raise SystemExit(f"layer type {layer['mediaType']} not handled")
            with tarfile.open(fileobj=blob(archive, layer["digest"])) as t:
                if any(m.name.rsplit("/", 1)[-1].startswith(".wh.") for m in t.getmembers()):
                    raise SystemExit("layer with whiteouts: not handled")
                # Owners and modes as the image has them (the filter argument exists from 3.11.4).
                kept = {"filter": "fully_trusted"} if hasattr(tarfile, "data_filter") else {}
                t.extractall(rootfs, numeric_owner=True, **kept)
    json.dump(config, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:])
