#!/usr/bin/env python3
"""Writes a tiny VITS-shaped text-to-speech model that sherpa-onnx runs, for the tests.

The folder it writes has the layout sherpa-onnx publishes for VITS models: `model.onnx` and
`tokens.txt`. The graph takes the inputs of a Piper/Coqui VITS export (`x` token ids, `x_length`,
`scales` = noise, length and noise-w scales, `sid` speaker id) and returns `y`, a tone of
SAMPLES_PER_TOKEN * length_scale samples per token whose pitch depends on the speaker: the audio's
length follows the text and the speaking rate, so tests can check real behaviour. Its metadata
asks for sherpa-onnx's character frontend (`frontend=characters`), which needs no espeak-ng data.

Usage: make-tiny-vits.py OUT_DIR [--speakers N] [--sample-rate HZ]
Needs Debian's python3-onnx (scripts/setup-debian.sh installs it); no weights are downloaded.
"""
import argparse
import math
import os

import onnx
from onnx import TensorProto, helper

SAMPLES_PER_TOKEN = 256
# Lowercase letters, digits, space and the punctuation the character frontend splits sentences on.
SYMBOLS = list(" abcdefghijklmnopqrstuvwxyz0123456789.,?!:;'-")


def build(speakers: int, sample_rate: int) -> onnx.ModelProto:
    c = lambda name, dtype, vals, dims=(): helper.make_tensor(name, dtype, list(dims), vals)
    nodes = [
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Gather", ["x_shape", "one_i"], ["n_tokens"], axis=0),
        helper.make_node("Cast", ["n_tokens"], ["n_tokens_f"], to=TensorProto.FLOAT),
        helper.make_node("Gather", ["scales", "one_i"], ["length_scale"], axis=0),
        helper.make_node("Mul", ["n_tokens_f", "per_token"], ["base_len"]),
        helper.make_node("Mul", ["base_len", "length_scale"], ["len_f"]),
        helper.make_node("Floor", ["len_f"], ["len_floor"]),
        helper.make_node("Cast", ["len_floor"], ["len_i"], to=TensorProto.INT64),
        helper.make_node("Range", ["zero_i", "len_i", "one_i"], ["t_i"]),
        helper.make_node("Cast", ["t_i"], ["t_f"], to=TensorProto.FLOAT),
        # Pitch: 220 Hz for speaker 0, a fifth higher for each further speaker.
        helper.make_node("Cast", ["sid"], ["sid_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["sid_f", "pitch_step"], ["pitch_add"]),
        helper.make_node("Add", ["pitch_add", "base_pitch"], ["pitch"]),
        helper.make_node("Mul", ["pitch", "two_pi_over_rate"], ["omega"]),
        helper.make_node("Mul", ["t_f", "omega"], ["phase"]),
        helper.make_node("Sin", ["phase"], ["wave"]),
        helper.make_node("Mul", ["wave", "amplitude"], ["quiet"]),
        helper.make_node("Reshape", ["quiet", "out_shape"], ["y"]),
    ]
    inits = [
        c("zero_i", TensorProto.INT64, [0]),
        c("one_i", TensorProto.INT64, [1]),
        c("per_token", TensorProto.FLOAT, [float(SAMPLES_PER_TOKEN)]),
        c("pitch_step", TensorProto.FLOAT, [110.0]),
        c("base_pitch", TensorProto.FLOAT, [220.0]),
        c("two_pi_over_rate", TensorProto.FLOAT, [2 * math.pi / sample_rate]),
        c("amplitude", TensorProto.FLOAT, [0.3]),
        c("out_shape", TensorProto.INT64, [1, 1, -1], (3,)),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny-vits",
        [
            helper.make_tensor_value_info("x", TensorProto.INT64, [1, "N"]),
            helper.make_tensor_value_info("x_length", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("scales", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("sid", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, "T"])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    meta = {
        "model_type": "vits",
        "comment": "coqui",
        "language": "English",
        "sample_rate": str(sample_rate),
        "n_speakers": str(speakers),
        "add_blank": "0",
        "use_eos_bos": "0",
        "frontend": "characters",
        "punctuation": ". , ? ! : ;",
    }
    for k, v in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = k, v
    onnx.checker.check_model(model)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--speakers", type=int, default=2)
    parser.add_argument("--sample-rate", type=int, default=16000)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    onnx.save(build(args.speakers, args.sample_rate), os.path.join(args.out, "model.onnx"))
    with open(os.path.join(args.out, "tokens.txt"), "w", encoding="utf-8") as f:
        for i, sym in enumerate(SYMBOLS):
            # The character frontend reads a line with only a number as the space's id.
            f.write(f" {i}\n" if sym == " " else f"{sym} {i}\n")


if __name__ == "__main__":
    main()
