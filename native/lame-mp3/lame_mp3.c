/*
 * lame_mp3: Node-API binding over the system's libmp3lame (Debian's libmp3lame-dev) for the
 * encoder workers. One encoder per continuous output stream, configured exactly as the wasm build
 * (wasm-media-encoders 0.7) configures LAME: 320 kbps CBR, 44.1 kHz in and out, stereo, no
 * ID3/Xing tag. Input is canonical mono s16 PCM duplicated to both channels, converted to float
 * as the wasm path does, so both encoders produce the same bytes (tested).
 *
 *   open() -> handle            encode(handle, Int16Array) -> Buffer
 *   finish(handle) -> Buffer    close(handle)   (frees; also done by GC if forgotten)
 */
#include <lame/lame.h>
#include <node_api.h>
#include <stdlib.h>

typedef struct {
  lame_global_flags *gfp;
  float *pcm;            /* float copy of the mono input, reused between calls */
  size_t pcm_capacity;   /* samples */
  unsigned char *mp3;    /* output buffer, reused between calls */
  size_t mp3_capacity;   /* bytes */
} encoder_t;

#define THROW_IF(cond, msg)                                                                        \
  do {                                                                                             \
    if (cond) {                                                                                    \
      napi_throw_error(env, NULL, msg);                                                            \
      return NULL;                                                                                 \
    }                                                                                              \
  } while (0)

static void encoder_free(encoder_t *enc) {
  if (enc->gfp != NULL) lame_close(enc->gfp);
  enc->gfp = NULL;
  free(enc->pcm);
  enc->pcm = NULL;
  free(enc->mp3);
  enc->mp3 = NULL;
}

static void finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  encoder_free((encoder_t *)data);
  free(data);
}

/*
 * Reads the call's arguments into argv (`want` of them, the first being an encoder handle) and
 * returns the handle's encoder; throws `usage` and returns NULL when they are not there.
 */
static encoder_t *encoder_arg(napi_env env, napi_callback_info info, size_t want, napi_value *argv,
                              const char *usage) {
  size_t argc = want;
  encoder_t *enc = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want ||
      napi_get_value_external(env, argv[0], (void **)&enc) != napi_ok || enc == NULL) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  return enc;
}

/* Grows the output buffer to LAME's worst case for `samples` (1.25 * n + 7200). */
static int reserve_mp3(encoder_t *enc, size_t samples) {
  size_t need = samples + samples / 4 + 7200;
  if (need <= enc->mp3_capacity) return 1;
  unsigned char *grown = realloc(enc->mp3, need);
  if (grown == NULL) return 0;
  enc->mp3 = grown;
  enc->mp3_capacity = need;
  return 1;
}

static napi_value copy_out(napi_env env, encoder_t *enc, int bytes) {
  napi_value result;
  void *data;
  THROW_IF(napi_create_buffer_copy(env, (size_t)bytes, enc->mp3, &data, &result) != napi_ok,
           "lame_mp3: cannot allocate the output buffer");
  return result;
}

static napi_value open_encoder(napi_env env, napi_callback_info info) {
  (void)info;
  encoder_t *enc = calloc(1, sizeof(encoder_t));
  THROW_IF(enc == NULL, "lame_mp3: out of memory");
  enc->gfp = lame_init();
  if (enc->gfp == NULL) {
    free(enc);
    THROW_IF(1, "lame_mp3: lame_init failed");
  }
  id3tag_init(enc->gfp);
  lame_set_num_channels(enc->gfp, 2);
  lame_set_in_samplerate(enc->gfp, 44100);
  lame_set_out_samplerate(enc->gfp, 44100);
  lame_set_bWriteVbrTag(enc->gfp, 0);
  lame_set_VBR(enc->gfp, vbr_off);
  lame_set_brate(enc->gfp, 320);
  lame_set_write_id3tag_automatic(enc->gfp, 0);
  if (lame_init_params(enc->gfp) < 0 || !reserve_mp3(enc, 4410)) {
    encoder_free(enc);
    free(enc);
    THROW_IF(1, "lame_mp3: lame_init_params failed");
  }
  napi_value handle;
  if (napi_create_external(env, enc, finalize, NULL, &handle) != napi_ok) {
    encoder_free(enc);
    free(enc);
    THROW_IF(1, "lame_mp3: cannot create the handle");
  }
  return handle;
}

static napi_value encode(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  encoder_t *enc = encoder_arg(env, info, 2, argv, "lame_mp3: encode(handle, pcm)");
  if (enc == NULL) return NULL;
  THROW_IF(enc->gfp == NULL, "lame_mp3: encoder is closed");
  napi_typedarray_type type;
  size_t length;
  void *data;
  THROW_IF(napi_get_typedarray_info(env, argv[1], &type, &length, &data, NULL, NULL) != napi_ok ||
               type != napi_int16_array,
           "lame_mp3: pcm must be an Int16Array");
  if (length == 0) return copy_out(env, enc, 0);
  THROW_IF(length > 0x7fffffff, "lame_mp3: pcm too long");
  if (length > enc->pcm_capacity) {
    float *grown = realloc(enc->pcm, length * sizeof(float));
    THROW_IF(grown == NULL, "lame_mp3: out of memory");
    enc->pcm = grown;
    enc->pcm_capacity = length;
  }
  const int16_t *in = (const int16_t *)data;
  for (size_t i = 0; i < length; i++) enc->pcm[i] = (float)in[i] / 32768.0f;
  THROW_IF(!reserve_mp3(enc, length), "lame_mp3: out of memory");
  int bytes = lame_encode_buffer_ieee_float(enc->gfp, enc->pcm, enc->pcm, (int)length, enc->mp3,
                                            (int)enc->mp3_capacity);
  THROW_IF(bytes < 0, "lame_mp3: lame_encode_buffer_ieee_float failed");
  return copy_out(env, enc, bytes);
}

static napi_value finish(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  encoder_t *enc = encoder_arg(env, info, 1, argv, "lame_mp3: finish(handle)");
  if (enc == NULL) return NULL;
  THROW_IF(enc->gfp == NULL, "lame_mp3: encoder is closed");
  int bytes = lame_encode_flush(enc->gfp, enc->mp3, (int)enc->mp3_capacity);
  THROW_IF(bytes < 0, "lame_mp3: lame_encode_flush failed");
  napi_value result = copy_out(env, enc, bytes);
  encoder_free(enc);
  return result;
}

static napi_value close_encoder(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  encoder_t *enc = encoder_arg(env, info, 1, argv, "lame_mp3: close(handle)");
  if (enc != NULL) encoder_free(enc);
  return NULL;
}

static napi_value version(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  napi_create_string_utf8(env, get_lame_version(), NAPI_AUTO_LENGTH, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_property_descriptor props[] = {
      {"open", NULL, open_encoder, NULL, NULL, NULL, napi_default, NULL},
      {"encode", NULL, encode, NULL, NULL, NULL, napi_default, NULL},
      {"finish", NULL, finish, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, close_encoder, NULL, NULL, NULL, napi_default, NULL},
      {"version", NULL, version, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  return exports;
}
