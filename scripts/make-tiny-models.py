#!/usr/bin/env python3
"""Writes a tiny Kokoro-, Kitten- or Matcha-shaped text-to-speech model that sherpa-onnx runs, for the tests.

Each folder has the layout sherpa-onnx publishes for its family, with graphs that take the inputs
and carry the metadata sherpa-onnx's loader of that family reads, and give a tone instead of speech:
SAMPLES_PER_TOKEN samples per phoneme token (divided by the speed), pitched by speaker. The audio's
length so follows the text and the speaking rate, and each speaker sounds apart, so tests can check
real behaviour. All three families phonemize with espeak-ng: `espeak-ng-data/` is a symbolic link
to an installed espeak-ng data folder (Debian's espeak-ng-data package, by default).

- kokoro: `model.onnx` (inputs tokens, style, speed; output audio), `voices.bin` (one style row per
  token count and speaker, its first value the speaker's pitch), `tokens.txt`.
- kitten: the same inputs with `model_type=kitten-tts` metadata and a 2-d `style_dim`.
- matcha: an acoustic model `model-steps-3.onnx` (inputs x, x_length, noise_scale, length_scale,
  and sid when there are several speakers; output a mel spectrogram with one band lit per
  speaker) and a Vocos vocoder `vocos-22khz-univ.onnx` (mel to magnitude and phase of an STFT
  that sherpa-onnx inverts).

Usage: make-tiny-models.py OUT_DIR --family kokoro|kitten|matcha|zipvoice|pocket [--speakers N]
                           [--espeak-ng-data DIR] [--meta KEY=VALUE]...
Needs Debian's python3-onnx and espeak-ng-data (scripts/setup-debian.sh installs them); no
weights are downloaded.
"""
import argparse
import glob
import json
import math
import os
import struct

import onnx
from onnx import TensorProto, helper

SAMPLES_PER_TOKEN = 512
# Where Debian's espeak-ng-data package puts it (under the architecture's library folder).
ESPEAK_DATA = next(iter(sorted(glob.glob("/usr/lib/*/espeak-ng-data"))), "/usr/share/espeak-ng-data")
# Kokoro's and Kitten's style rows: one per token count up to this (Kokoro's exports use 510).
MAX_TOKENS = 510
STYLE_WIDTH = 8
BASE_PITCH = 220.0
PITCH_STEP = 110.0
AMPLITUDE = 0.3
# Matcha's mel frames per token (hop_length samples each) and mel bands.
HOP = 256
N_FFT = 1024
N_MELS = 8
# ZipVoice's mel level (its log-mel feature scale, 0.1, times 1): sherpa-onnx divides it by the scale
# before the vocoder, which so sees the 1.0 that Matcha's bands have.
TEXT_LEVEL = 0.1


def phoneme_symbols() -> list:
    """One-code-point symbols espeak-ng's IPA output uses (and the ASCII punctuation around them).

    Printable ASCII, Latin-1 letters and Latin Extended, IPA extensions, spacing modifiers (stress,
    length), combining diacritics, Greek (θ, β, χ) and phonetic extensions (ᵻ): every phoneme of
    the languages espeak-ng speaks is one token, so the token count follows the text.
    """
    ranges = [(0x21, 0x7E), (0xC0, 0x24F), (0x250, 0x2FF), (0x300, 0x36F), (0x370, 0x3FF), (0x1D00, 0x1DBF)]
    out = []
    for lo, hi in ranges:
        for cp in range(lo, hi + 1):
            ch = chr(cp)
            # Unassigned code points and anything a tokens reader could take for a space.
            if ch.isspace() or not ch.isprintable() and not 0x300 <= cp <= 0x36F:
                continue
            out.append(ch)
    return out


def write_tokens(path: str, first: list) -> None:
    """tokens.txt: `first` (special symbols, the space as " ") with ids 0.., then the phoneme symbols."""
    symbols = list(first) + [s for s in phoneme_symbols() if s not in first]
    with open(path, "w", encoding="utf-8") as f:
        for i, sym in enumerate(symbols):
            # sherpa-onnx's reader takes a line with only a number as the space's id.
            f.write(f" {i}\n" if sym == " " else f"{sym} {i}\n")


def const(name, dtype, vals, dims=()):
    return helper.make_tensor(name, dtype, list(dims), vals)


# Metadata entries of --meta, over the family's own (not the vocoder's).
OVERRIDES: dict = {}


def finish(graph, meta: dict, overrides: bool = True) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    for k, v in {**meta, **(OVERRIDES if overrides else {})}.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = k, str(v)
    onnx.checker.check_model(model)
    return model


def style_tone_model(name: str, ids: str, meta: dict) -> onnx.ModelProto:
    """Kokoro's and Kitten's graph: tokens [1, N], style [1, W], speed [1] -> audio [T].

    T = floor((N - 2) * SAMPLES_PER_TOKEN / speed): the tokens less the start and end ids sherpa-onnx
    puts around them. The pitch is style[0, 0], the speaker's row of voices.bin.
    """
    nodes = [
        helper.make_node("Shape", [ids], ["ids_shape"]),
        helper.make_node("Gather", ["ids_shape", "one_i"], ["n_ids"], axis=0),
        helper.make_node("Sub", ["n_ids", "two_i"], ["n_tokens"]),
        helper.make_node("Max", ["n_tokens", "one_i"], ["n_tokens_pos"]),
        helper.make_node("Cast", ["n_tokens_pos"], ["n_tokens_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["n_tokens_f", "per_token"], ["base_len"]),
        helper.make_node("Div", ["base_len", "speed"], ["len_f"]),
        helper.make_node("Floor", ["len_f"], ["len_floor"]),
        helper.make_node("Cast", ["len_floor"], ["len_i"], to=TensorProto.INT64),
        helper.make_node("Squeeze", ["len_i"], ["len_s"]),
        helper.make_node("Range", ["zero_s", "len_s", "one_s"], ["t_i"]),
        helper.make_node("Cast", ["t_i"], ["t_f"], to=TensorProto.FLOAT),
        helper.make_node("Slice", ["style", "zero_i2", "one_i2", "axes01"], ["pitch_2d"]),
        helper.make_node("Reshape", ["pitch_2d", "one_i"], ["pitch"]),
        helper.make_node("Mul", ["pitch", "two_pi_over_rate"], ["omega"]),
        helper.make_node("Mul", ["t_f", "omega"], ["phase"]),
        helper.make_node("Sin", ["phase"], ["wave"]),
        helper.make_node("Mul", ["wave", "amplitude"], ["audio"]),
    ]
    rate = int(meta["sample_rate"])
    inits = [
        const("zero_s", TensorProto.INT64, [0]),
        const("one_s", TensorProto.INT64, [1]),
        const("one_i", TensorProto.INT64, [1], (1,)),
        const("two_i", TensorProto.INT64, [2], (1,)),
        const("zero_i2", TensorProto.INT64, [0, 0], (2,)),
        const("one_i2", TensorProto.INT64, [1, 1], (2,)),
        const("axes01", TensorProto.INT64, [0, 1], (2,)),
        const("per_token", TensorProto.FLOAT, [float(SAMPLES_PER_TOKEN)], (1,)),
        const("two_pi_over_rate", TensorProto.FLOAT, [2 * math.pi / rate], (1,)),
        const("amplitude", TensorProto.FLOAT, [AMPLITUDE], (1,)),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [
            helper.make_tensor_value_info(ids, TensorProto.INT64, [1, "N"]),
            helper.make_tensor_value_info("style", TensorProto.FLOAT, [1, STYLE_WIDTH]),
            helper.make_tensor_value_info("speed", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["T"])],
        inits,
    )
    return finish(graph, meta)


def write_voices(path: str, speakers: int, rows: int) -> None:
    """voices.bin: float32 [speakers, rows, STYLE_WIDTH]; every row of a speaker starts with its pitch."""
    with open(path, "wb") as f:
        for s in range(speakers):
            row = [BASE_PITCH + PITCH_STEP * s] + [0.0] * (STYLE_WIDTH - 1)
            f.write(struct.pack(f"<{STYLE_WIDTH * rows}f", *(row * rows)))


def speaker_meta(speakers: int) -> dict:
    return {
        "n_speakers": speakers,
        "speaker_names": ",".join(f"tone_{i}" for i in range(speakers)),
    }


def make_kokoro(out: str, speakers: int) -> None:
    meta = {
        "model_type": "kokoro",
        "language": "English",
        "has_espeak": 1,
        "sample_rate": 24000,
        "version": 1,
        "voice": "en-us",
        # (token count, 1, style width): sherpa-onnx picks the row of the sentence's token count.
        "style_dim": f"{MAX_TOKENS},1,{STYLE_WIDTH}",
        **speaker_meta(speakers),
        "comment": "tiny Kokoro-shaped test model: a tone per phoneme",
    }
    onnx.save(style_tone_model("tiny-kokoro", "tokens", meta), os.path.join(out, "model.onnx"))
    write_voices(os.path.join(out, "voices.bin"), speakers, MAX_TOKENS)
    # Kokoro's id 0 ("$") starts and ends each sentence; "." is followed by a space token.
    write_tokens(os.path.join(out, "tokens.txt"), ["$", " "])


def make_kitten(out: str, speakers: int) -> None:
    meta = {
        "model_type": "kitten-tts",
        "language": "English",
        "has_espeak": 1,
        "sample_rate": 24000,
        "version": 1,
        "voice": "en-us",
        # One style row per speaker (Kitten's nano exports); sherpa-onnx also takes one per token count.
        "style_dim": f"1,{STYLE_WIDTH}",
        **speaker_meta(speakers),
        "comment": "tiny Kitten-shaped test model: a tone per phoneme",
    }
    onnx.save(style_tone_model("tiny-kitten", "input_ids", meta), os.path.join(out, "model.onnx"))
    write_voices(os.path.join(out, "voices.bin"), speakers, 1)
    write_tokens(os.path.join(out, "tokens.txt"), ["$", " "])


def write_vocos(path: str) -> None:
    """A Vocos vocoder: mel band b lights STFT bin 16 * (b + 1) (a whole number of periods per hop, so
    a constant phase of 0 gives a steady tone after the inverse STFT)."""
    # The vocoder: mel band b lights STFT bin 16 * (b + 1) (a whole number of periods per hop, so
    # a constant phase of 0 gives a steady tone after the inverse STFT).
    bins = N_FFT // 2 + 1
    # sherpa-onnx's inverse STFT (Hann window, overlap-added at a quarter of it, divided by the
    # windows' sum) turns a bin of magnitude m into a tone of amplitude 8 m / (3 N_FFT).
    magnitude = AMPLITUDE * 3 * N_FFT / 8
    weights = [0.0] * (bins * N_MELS)
    for b in range(N_MELS):
        weights[(16 * (b + 1)) * N_MELS + b] = magnitude
    v_nodes = [
        helper.make_node("MatMul", ["bands_to_bins", "mels"], ["mag"]),
        helper.make_node("Mul", ["mag", "zero_f"], ["zeros"]),
        helper.make_node("Add", ["zeros", "one_f"], ["x"]),
        helper.make_node("Identity", ["zeros"], ["y"]),
    ]
    v_inits = [
        const("bands_to_bins", TensorProto.FLOAT, weights, (bins, N_MELS)),
        const("zero_f", TensorProto.FLOAT, [0.0], (1,)),
        const("one_f", TensorProto.FLOAT, [1.0], (1,)),
    ]
    spec = [1, bins, "F"]
    v_graph = helper.make_graph(
        v_nodes,
        "tiny-vocos",
        [helper.make_tensor_value_info("mels", TensorProto.FLOAT, [1, N_MELS, "F"])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, spec) for n in ("mag", "x", "y")],
        v_inits,
    )
    v_meta = {
        "model_type": "vocos",
        "n_fft": N_FFT,
        "hop_length": HOP,
        "win_length": N_FFT,
        "center": 1,
        "normalized": 0,
        "window_type": "hann",
        "pad_mode": "reflect",
    }
    onnx.save(finish(v_graph, v_meta, overrides=False), path)


def make_matcha(out: str, speakers: int) -> None:
    rate = 22050
    # The acoustic model: x [1, N] -> mel [1, N_MELS, frames], frames = N * length_scale, band sid
    # lit. A single-speaker model has no sid input, as the published single-speaker Matcha models.
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.INT64, [1, "N"]),
        helper.make_tensor_value_info("x_length", TensorProto.INT64, [1]),
        helper.make_tensor_value_info("noise_scale", TensorProto.FLOAT, [1]),
        helper.make_tensor_value_info("length_scale", TensorProto.FLOAT, [1]),
    ]
    if speakers > 1:
        inputs.append(helper.make_tensor_value_info("sid", TensorProto.INT64, [1]))
    nodes = [
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Gather", ["x_shape", "one_i"], ["n_tokens"], axis=0),
        helper.make_node("Cast", ["n_tokens"], ["n_tokens_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["n_tokens_f", "frames_per_token"], ["frames_base"]),
        helper.make_node("Mul", ["frames_base", "length_scale"], ["frames_f"]),
        helper.make_node("Floor", ["frames_f"], ["frames_floor"]),
        helper.make_node("Cast", ["frames_floor"], ["frames"], to=TensorProto.INT64),
        helper.make_node("OneHot", ["sid", "n_mels", "off_on"], ["band"], axis=-1),
        helper.make_node("Reshape", ["band", "band_shape"], ["band_col"]),
        helper.make_node("Concat", ["one_i", "n_mels", "frames"], ["mel_shape"], axis=0),
        helper.make_node("Expand", ["band_col", "mel_shape"], ["mel"]),
    ]
    inits = [
        const("one_i", TensorProto.INT64, [1], (1,)),
        const("n_mels", TensorProto.INT64, [N_MELS], (1,)),
        const("off_on", TensorProto.FLOAT, [0.0, 1.0], (2,)),
        const("band_shape", TensorProto.INT64, [1, N_MELS, 1], (3,)),
        # SAMPLES_PER_TOKEN / HOP frames (of HOP samples each) per token.
        const("frames_per_token", TensorProto.FLOAT, [float(SAMPLES_PER_TOKEN // HOP)], (1,)),
    ]
    if speakers == 1:
        inits.append(const("sid", TensorProto.INT64, [0], (1,)))
    graph = helper.make_graph(
        nodes,
        "tiny-matcha",
        inputs,
        [helper.make_tensor_value_info("mel", TensorProto.FLOAT, [1, N_MELS, "F"])],
        inits,
    )
    meta = {
        "model_type": "matcha-tts",
        "language": "English",
        "voice": "en-us",
        "has_espeak": 1,
        "jieba": 0,
        "sample_rate": rate,
        "version": 1,
        "pad_id": 0,
        "use_eos_bos": 0,
        **speaker_meta(speakers),
        "comment": "tiny Matcha-shaped test model: a tone per phoneme",
    }
    onnx.save(finish(graph, meta), os.path.join(out, "model-steps-3.onnx"))

    write_vocos(os.path.join(out, "vocos-22khz-univ.onnx"))
    # Matcha's pad ("_", id 0) goes between tokens; "^" and "$" must exist even when unused.
    write_tokens(os.path.join(out, "tokens.txt"), ["_", "^", "$", " "])


def make_zipvoice(out: str, speakers: int) -> None:
    """ZipVoice: a voice cloned from a reference clip (sherpa-onnx passes the clip's log-mel frames
    and its transcript's tokens); the loudest mel band of the clip picks the output's tone, so two
    clips of different pitch give different audio for the same text."""
    del speakers  # A ZipVoice model has no speakers of its own: its voice is the reference.
    rate = 24000
    # The text encoder: tokens [1, N], prompt_tokens [1, P], prompt_features_len [1], speed [1] ->
    # text_condition [1, prompt frames + frames of the text, N_MELS], TEXT_LEVEL everywhere. The
    # text's frames follow its token count and the speed, as the tones of the other families.
    e_nodes = [
        helper.make_node("Shape", ["tokens"], ["tokens_shape"]),
        helper.make_node("Gather", ["tokens_shape", "one_i"], ["n_tokens"], axis=0),
        helper.make_node("Cast", ["n_tokens"], ["n_tokens_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["n_tokens_f", "frames_per_token"], ["frames_base"]),
        helper.make_node("Div", ["frames_base", "speed"], ["frames_f"]),
        helper.make_node("Floor", ["frames_f"], ["frames_floor"]),
        helper.make_node("Cast", ["frames_floor"], ["text_frames_raw"], to=TensorProto.INT64),
        helper.make_node("Max", ["text_frames_raw", "one_i"], ["text_frames"]),
        # The transcript's tokens are read (their count only) as the real encoder reads them.
        helper.make_node("Shape", ["prompt_tokens"], ["prompt_shape"]),
        helper.make_node("Gather", ["prompt_shape", "one_i"], ["n_prompt_tokens"], axis=0),
        helper.make_node("Mul", ["n_prompt_tokens", "zero_i"], ["no_frames"]),
        helper.make_node("Add", ["prompt_features_len", "text_frames"], ["frames_sum"]),
        helper.make_node("Add", ["frames_sum", "no_frames"], ["frames"]),
        helper.make_node("Concat", ["one_i", "frames", "n_mels"], ["cond_shape"], axis=0),
        helper.make_node(
            "ConstantOfShape",
            ["cond_shape"],
            ["text_condition"],
            value=helper.make_tensor("level", TensorProto.FLOAT, [1], [TEXT_LEVEL]),
        ),
    ]
    e_inits = [
        const("zero_i", TensorProto.INT64, [0], (1,)),
        const("one_i", TensorProto.INT64, [1], (1,)),
        const("n_mels", TensorProto.INT64, [N_MELS], (1,)),
        const("frames_per_token", TensorProto.FLOAT, [float(SAMPLES_PER_TOKEN // HOP)], (1,)),
    ]
    e_graph = helper.make_graph(
        e_nodes,
        "tiny-zipvoice-encoder",
        [
            helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, "N"]),
            helper.make_tensor_value_info("prompt_tokens", TensorProto.INT64, [1, "P"]),
            helper.make_tensor_value_info("prompt_features_len", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("speed", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor_value_info("text_condition", TensorProto.FLOAT, [1, "F", N_MELS])],
        e_inits,
    )
    e_meta = {
        "model_type": "zipvoice",
        "use_espeak": 1,
        "language": "English",
        "voice": "en-us",
        "comment": "tiny ZipVoice-shaped test model: a tone per phoneme, pitched by the reference",
    }
    onnx.save(finish(e_graph, e_meta), os.path.join(out, "encoder.onnx"))

    # The flow-matching decoder: t [1], x, text_condition, speech_condition [1, F, N_MELS],
    # guidance_scale [1] -> v. v = (target - x) / (1 - t): sherpa-onnx's Euler steps end at t = 1,
    # so the last step lands on `target` whatever the starting noise, and a clip gives the same
    # audio every time. target = text_condition in the band where the clip's frames (the first
    # prompt_features_len rows of speech_condition, the rest zeros) sum highest.
    d_nodes = [
        helper.make_node("ReduceSum", ["speech_condition", "axis1"], ["clip_sum"], keepdims=1),
        helper.make_node("ArgMax", ["clip_sum"], ["band"], axis=2, keepdims=0),
        helper.make_node("OneHot", ["band", "n_mels", "off_on"], ["band_mask"], axis=-1),
        helper.make_node("Mul", ["text_condition", "band_mask"], ["target"]),
        helper.make_node("Sub", ["target", "x"], ["towards"]),
        helper.make_node("Sub", ["one_f", "t"], ["left"]),
        helper.make_node("Div", ["towards", "left"], ["flow"]),
        # Guidance changes nothing here; the input is read as the real decoder reads it.
        helper.make_node("Mul", ["guidance_scale", "zero_f"], ["no_guidance"]),
        helper.make_node("Add", ["flow", "no_guidance"], ["v"]),
    ]
    d_inits = [
        const("axis1", TensorProto.INT64, [1], (1,)),
        const("n_mels", TensorProto.INT64, [N_MELS], (1,)),
        const("off_on", TensorProto.FLOAT, [0.0, 1.0], (2,)),
        const("one_f", TensorProto.FLOAT, [1.0], (1,)),
        const("zero_f", TensorProto.FLOAT, [0.0], (1,)),
    ]
    frames = [1, "F", N_MELS]
    d_graph = helper.make_graph(
        d_nodes,
        "tiny-zipvoice-decoder",
        [
            helper.make_tensor_value_info("t", TensorProto.FLOAT, [1]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, frames),
            helper.make_tensor_value_info("text_condition", TensorProto.FLOAT, frames),
            helper.make_tensor_value_info("speech_condition", TensorProto.FLOAT, frames),
            helper.make_tensor_value_info("guidance_scale", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, frames)],
        d_inits,
    )
    d_meta = {
        "version": 1,
        "feat_dim": N_MELS,
        "num_mels": N_MELS,
        "sample_rate": rate,
        "n_fft": N_FFT,
        "hop_length": HOP,
        "window_length": N_FFT,
    }
    onnx.save(finish(d_graph, d_meta), os.path.join(out, "decoder.onnx"))
    # Published apart from the model (vocoder-models/vocos_24khz.onnx); users put it in the folder.
    write_vocos(os.path.join(out, "vocos_24khz.onnx"))
    write_tokens(os.path.join(out, "tokens.txt"), ["_", "^", "$", " "])
    # sherpa-onnx's ZipVoice front end ends its process without a lexicon (the published one maps
    # Chinese characters to pinyin tokens): two words of tokens.txt's symbols stand in for it.
    with open(os.path.join(out, "lexicon.txt"), "w", encoding="utf-8") as f:
        f.write("\u4f60 n i\n\u597d h a o\n")


# Pocket TTS's frame: Mimi's latent width (sherpa-onnx fixes it at 32), the width of the
# conditioning embeddings (fixed at 1024), and the samples the tiny decoder writes per frame.
POCKET_LATENT = 32
POCKET_EMBED = 1024
POCKET_FRAME = 480
POCKET_RATE = 24000
# The lowest and highest tone the tiny Pocket model speaks at (a silent clip has no crossings).
POCKET_MIN_HZ = 60.0
POCKET_MAX_HZ = 4000.0


def write_pocket_tokenizer(out: str) -> None:
    """vocab.json ({piece: id}) and token_scores.json ({piece: score}), the SentencePiece model
    sherpa-onnx's Pocket TTS reads: one piece per printable ASCII character and the word marker
    "▁", and the 256 byte pieces "<0xNN>" it falls back to for everything else."""
    pieces = ["<unk>", "\u2581"] + [chr(c) for c in range(0x21, 0x7F)]
    pieces += [f"<0x{i:02X}>" for i in range(256)]
    vocab = {p: i for i, p in enumerate(pieces)}
    # Bytes score lowest so that a character with its own piece never splits into bytes.
    scores = {p: (-100.0 if p.startswith("<0x") else -1.0) for p in pieces}
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out, "token_scores.json"), "w", encoding="utf-8") as f:
        json.dump(scores, f, ensure_ascii=False)


def make_pocket(out: str, speakers: int) -> None:
    """Pocket TTS: a voice cloned from a reference clip, which sherpa-onnx passes as raw samples at
    24 kHz to the Mimi encoder. The tiny encoder measures the clip's pitch by its zero crossings and
    the output is a tone at that pitch, one frame (POCKET_FRAME samples) per text token and the
    three frames sherpa-onnx adds after the end-of-speech logit fires, so two clips of different
    pitch give different audio for the same text and the same clip gives the same audio."""
    del speakers  # A Pocket TTS model has no speakers of its own: its voice is the reference.
    f = TensorProto.FLOAT
    i64 = TensorProto.INT64

    # text_conditioner: token_ids [1, N] -> embeddings [1, N, 1024], 1.0 in column 1 of each row:
    # the language model counts the text's tokens from it.
    t_nodes = [
        helper.make_node("Shape", ["token_ids"], ["ids_shape"]),
        helper.make_node("ConstantOfShape", ["ids_shape"], ["ones"], value=const("one", f, [1.0], (1,))),
        helper.make_node("Unsqueeze", ["ones", "axis2"], ["ones3"]),
        helper.make_node("Pad", ["ones3", "text_pads"], ["embeddings"]),
    ]
    t_inits = [
        const("axis2", i64, [2], (1,)),
        const("text_pads", i64, [0, 0, 1, 0, 0, POCKET_EMBED - 2], (6,)),
    ]
    t_graph = helper.make_graph(
        t_nodes,
        "tiny-pocket-text-conditioner",
        [helper.make_tensor_value_info("token_ids", i64, [1, "N"])],
        [helper.make_tensor_value_info("embeddings", f, [1, "N", POCKET_EMBED])],
        t_inits,
    )
    onnx.save(finish(t_graph, {}), os.path.join(out, "text_conditioner.onnx"))

    # encoder (Mimi): audio [1, 1, S] -> voice embedding [1, 1, 1024], the clip's pitch in Hz
    # (sign changes per sample times half the rate, rounded) in column 0.
    e_nodes = [
        # A crossing is a change of sign, a zero counted as positive: a tone whose period is a whole
        # number of samples has exact zeros, which a product of neighbours below zero would miss.
        helper.make_node("Less", ["audio", "zero_f"], ["negative"]),
        helper.make_node("Slice", ["negative", "one_i", "end_i", "axis2"], ["later"]),
        helper.make_node("Slice", ["negative", "zero_i", "minus_one_i", "axis2"], ["earlier"]),
        helper.make_node("Xor", ["later", "earlier"], ["crossing"]),
        helper.make_node("Cast", ["crossing"], ["crossing_f"], to=f),
        helper.make_node("ReduceSum", ["crossing_f", "axis2"], ["crossings"], keepdims=1),
        helper.make_node("Shape", ["later"], ["later_shape"]),
        helper.make_node("Gather", ["later_shape", "axis2"], ["pairs"], axis=0),
        helper.make_node("Cast", ["pairs"], ["pairs_f"], to=f),
        helper.make_node("Max", ["pairs_f", "one_f"], ["pairs_safe"]),
        helper.make_node("Div", ["crossings", "pairs_safe"], ["rate_of_crossing"]),
        helper.make_node("Mul", ["rate_of_crossing", "half_rate"], ["hz_raw"]),
        helper.make_node("Round", ["hz_raw"], ["hz"]),
        helper.make_node("Pad", ["hz", "voice_pads"], ["voice"]),
    ]
    e_inits = [
        const("zero_i", i64, [0], (1,)),
        const("one_i", i64, [1], (1,)),
        const("minus_one_i", i64, [-1], (1,)),
        const("end_i", i64, [2**62], (1,)),
        const("axis2", i64, [2], (1,)),
        const("zero_f", f, [0.0], ()),
        const("one_f", f, [1.0], (1,)),
        const("half_rate", f, [POCKET_RATE / 2], (1,)),
        const("voice_pads", i64, [0, 0, 0, 0, 0, POCKET_EMBED - 1], (6,)),
    ]
    e_graph = helper.make_graph(
        e_nodes,
        "tiny-pocket-encoder",
        [helper.make_tensor_value_info("audio", f, [1, 1, "S"])],
        [helper.make_tensor_value_info("voice", f, [1, 1, POCKET_EMBED])],
        e_inits,
    )
    onnx.save(finish(e_graph, {}), os.path.join(out, "encoder.onnx"))

    # lm_main: seq [1, S, 32] (S = 0 while sherpa-onnx feeds the voice and the text, 1 per frame
    # after), text_embeddings [1, T, 1024] and three state tensors -> conditioning [1, 32],
    # eos_logit [1, 1] and the next states. The states add up the frames run, the text's tokens
    # (column 1) and the voice's pitch (column 0); the end-of-speech logit crosses sherpa-onnx's
    # threshold (-4) on the frame after the token count (at least one, since sherpa-onnx only
    # stops on an end after its first frame).
    m_nodes = [
        helper.make_node("Shape", ["seq"], ["seq_shape"]),
        helper.make_node("Gather", ["seq_shape", "one_i"], ["seq_len"], axis=0),
        helper.make_node("Cast", ["seq_len"], ["seq_len_f"], to=f),
        helper.make_node("Add", ["state_steps", "seq_len_f"], ["out_state_steps"]),
        helper.make_node("Slice", ["text_embeddings", "zero_i", "one_i", "axis2"], ["voice_col"]),
        helper.make_node("ReduceSum", ["voice_col", "axes12"], ["voice_sum"], keepdims=0),
        helper.make_node("Add", ["state_voice", "voice_sum"], ["out_state_voice"]),
        helper.make_node("Slice", ["text_embeddings", "one_i", "two_i", "axis2"], ["token_col"]),
        helper.make_node("ReduceSum", ["token_col", "axes12"], ["token_sum"], keepdims=0),
        helper.make_node("Add", ["state_tokens", "token_sum"], ["out_state_tokens"]),
        helper.make_node("Max", ["out_state_tokens", "one_f"], ["frames_of_text"]),
        helper.make_node("Sub", ["out_state_steps", "frames_of_text"], ["past"]),
        helper.make_node("Mul", ["past", "ten_f"], ["past10"]),
        helper.make_node("Sub", ["past10", "four_and_half"], ["eos_flat"]),
        helper.make_node("Unsqueeze", ["eos_flat", "zero_i"], ["eos_logit"]),
        helper.make_node("Unsqueeze", ["out_state_voice", "zero_i"], ["voice2"]),
        helper.make_node("Pad", ["voice2", "cond_pads"], ["conditioning"]),
    ]
    m_inits = [
        const("zero_i", i64, [0], (1,)),
        const("one_i", i64, [1], (1,)),
        const("two_i", i64, [2], (1,)),
        const("axis2", i64, [2], (1,)),
        const("axes12", i64, [1, 2], (2,)),
        const("one_f", f, [1.0], (1,)),
        const("ten_f", f, [10.0], (1,)),
        const("four_and_half", f, [4.5], (1,)),
        const("cond_pads", i64, [0, 0, 0, POCKET_LATENT - 1], (4,)),
    ]
    m_graph = helper.make_graph(
        m_nodes,
        "tiny-pocket-lm-main",
        [
            helper.make_tensor_value_info("seq", f, [1, "S", POCKET_LATENT]),
            helper.make_tensor_value_info("text_embeddings", f, [1, "T", POCKET_EMBED]),
            helper.make_tensor_value_info("state_steps", f, [1]),
            helper.make_tensor_value_info("state_tokens", f, [1]),
            helper.make_tensor_value_info("state_voice", f, [1]),
        ],
        [
            helper.make_tensor_value_info("conditioning", f, [1, POCKET_LATENT]),
            helper.make_tensor_value_info("eos_logit", f, [1, 1]),
            helper.make_tensor_value_info("out_state_steps", f, [1]),
            helper.make_tensor_value_info("out_state_tokens", f, [1]),
            helper.make_tensor_value_info("out_state_voice", f, [1]),
        ],
        m_inits,
    )
    onnx.save(finish(m_graph, {}), os.path.join(out, "lm_main.onnx"))

    # lm_flow: c [1, 32], s [1, 1], t [1, 1], x [1, 32] -> v = (c - x) / (1 - s). sherpa-onnx's
    # Euler steps from s = 0 end at t = 1, so the last one lands on the conditioning whatever the
    # starting noise (its seed is random).
    l_nodes = [
        helper.make_node("Sub", ["c", "x"], ["towards"]),
        helper.make_node("Sub", ["one_f", "s"], ["left"]),
        helper.make_node("Div", ["towards", "left"], ["flow"]),
        # t is read as the real flow net reads it; the straight path needs only s.
        helper.make_node("Mul", ["t", "zero_f"], ["no_t"]),
        helper.make_node("Add", ["flow", "no_t"], ["v"]),
    ]
    l_inits = [const("one_f", f, [1.0], (1,)), const("zero_f", f, [0.0], (1,))]
    l_graph = helper.make_graph(
        l_nodes,
        "tiny-pocket-lm-flow",
        [
            helper.make_tensor_value_info("c", f, [1, POCKET_LATENT]),
            helper.make_tensor_value_info("s", f, [1, 1]),
            helper.make_tensor_value_info("t", f, [1, 1]),
            helper.make_tensor_value_info("x", f, [1, POCKET_LATENT]),
        ],
        [helper.make_tensor_value_info("v", f, [1, POCKET_LATENT])],
        l_inits,
    )
    onnx.save(finish(l_graph, {}), os.path.join(out, "lm_flow.onnx"))

    # decoder (Mimi): latent [1, C, 32] and the samples written so far [1] -> audio [1, 1,
    # C * POCKET_FRAME], a sine at each frame's pitch (column 0, rounded: the flow's last step
    # may miss by a rounding error), continuous across sherpa-onnx's chunks of frames.
    d_nodes = [
        helper.make_node("Slice", ["latent", "zero_i", "one_i", "axis2"], ["pitch_col"]),
        helper.make_node("Round", ["pitch_col"], ["pitch_round"]),
        helper.make_node("Clip", ["pitch_round", "min_hz", "max_hz"], ["pitch"]),
        helper.make_node("Shape", ["latent"], ["latent_shape"]),
        helper.make_node("Gather", ["latent_shape", "one_i"], ["chunk"], axis=0),
        helper.make_node("Concat", ["one_i", "chunk", "frame_i"], ["spread_shape"], axis=0),
        helper.make_node("Expand", ["pitch", "spread_shape"], ["pitch_spread"]),
        helper.make_node("Mul", ["chunk", "frame_i"], ["total"]),
        helper.make_node("Concat", ["one_i", "one_i", "total"], ["audio_shape"], axis=0),
        helper.make_node("Reshape", ["pitch_spread", "audio_shape"], ["pitch_per_sample"]),
        helper.make_node("Cast", ["total"], ["total_f"], to=f),
        helper.make_node("Squeeze", ["total_f", "zero_i"], ["total_scalar"]),
        helper.make_node("Range", ["zero_s", "total_scalar", "one_s"], ["index"]),
        helper.make_node("Add", ["index", "state_written"], ["position"]),
        helper.make_node("Mul", ["pitch_per_sample", "position"], ["cycles_rate"]),
        helper.make_node("Mul", ["cycles_rate", "two_pi_over_rate"], ["phase"]),
        helper.make_node("Sin", ["phase"], ["wave"]),
        helper.make_node("Mul", ["wave", "amplitude"], ["audio"]),
        helper.make_node("Add", ["state_written", "total_f"], ["out_state_written"]),
    ]
    d_inits = [
        const("zero_i", i64, [0], (1,)),
        const("one_i", i64, [1], (1,)),
        const("axis2", i64, [2], (1,)),
        const("frame_i", i64, [POCKET_FRAME], (1,)),
        const("min_hz", f, [POCKET_MIN_HZ], ()),
        const("max_hz", f, [POCKET_MAX_HZ], ()),
        const("zero_s", f, [0.0], ()),
        const("one_s", f, [1.0], ()),
        const("two_pi_over_rate", f, [2 * math.pi / POCKET_RATE], (1,)),
        const("amplitude", f, [AMPLITUDE], (1,)),
    ]
    d_graph = helper.make_graph(
        d_nodes,
        "tiny-pocket-decoder",
        [
            helper.make_tensor_value_info("latent", f, [1, "C", POCKET_LATENT]),
            helper.make_tensor_value_info("state_written", f, [1]),
        ],
        [
            helper.make_tensor_value_info("audio", f, [1, 1, "A"]),
            helper.make_tensor_value_info("out_state_written", f, [1]),
        ],
        d_inits,
    )
    onnx.save(finish(d_graph, {}), os.path.join(out, "decoder.onnx"))
    write_pocket_tokenizer(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--family", required=True, choices=["kokoro", "kitten", "matcha", "zipvoice", "pocket"])
    parser.add_argument("--speakers", type=int, default=2)
    parser.add_argument("--espeak-ng-data", default=ESPEAK_DATA)
    parser.add_argument(
        "--meta", action="append", default=[], metavar="KEY=VALUE", help="set a metadata entry of the model"
    )
    args = parser.parse_args()
    if args.speakers < 1 or (args.family == "matcha" and args.speakers > N_MELS):
        parser.error(f"--speakers must be 1..{N_MELS} for matcha, at least 1 otherwise")
    if not os.path.isfile(os.path.join(args.espeak_ng_data, "phontab")):
        parser.error(f"{args.espeak_ng_data} is not an espeak-ng data folder (install espeak-ng-data)")
    for entry in args.meta:
        key, sep, value = entry.partition("=")
        if not sep:
            parser.error(f"--meta {entry}: expected KEY=VALUE")
        OVERRIDES[key] = value
    os.makedirs(args.out, exist_ok=True)
    make = {
        "kokoro": make_kokoro,
        "kitten": make_kitten,
        "matcha": make_matcha,
        "zipvoice": make_zipvoice,
        "pocket": make_pocket,
    }[args.family]
    make(args.out, args.speakers)
    link = os.path.join(args.out, "espeak-ng-data")
    if not os.path.lexists(link):
        os.symlink(os.path.abspath(args.espeak_ng_data), link)


if __name__ == "__main__":
    main()
