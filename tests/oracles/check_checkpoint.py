"""Reads a spread checkpoint with the reference `safetensors` library, as a user's own script would: the 24-byte
header (magic, version, payload size, CRC-32), then the payload [24:] as a safetensors file, its metadata and every
tensor. Prints one JSON object: {"version", "size_ok", "crc_ok", "metadata", "tensors": {name: {"dtype", "shape",
"values"}}}, values flattened as float64 (tests/test_checkpoint_format.cpp compares them with what spread saved)."""
import json
import os
import struct
import sys
import tempfile
import zlib

from safetensors import safe_open


def main(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"SPRDCKPT", "bad magic"
    version, size, crc = struct.unpack("<IQI", data[8:24])
    payload = data[24:]
    with tempfile.TemporaryDirectory() as tmp:
        file = os.path.join(tmp, "payload.safetensors")
        with open(file, "wb") as f:
            f.write(payload)
        with safe_open(file, framework="pt") as st:
            metadata = st.metadata()
            tensors = {}
            for name in st.keys():
                t = st.get_tensor(name)
                tensors[name] = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                                 "values": t.double().flatten().tolist()}
    print(json.dumps({"version": version, "size_ok": size == len(payload),
                      "crc_ok": crc == (zlib.crc32(payload) & 0xFFFFFFFF), "metadata": metadata,
                      "tensors": tensors}))


if __name__ == "__main__":
    main(sys.argv[1])
