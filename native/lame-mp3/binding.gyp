{
  "targets": [
    {
      "target_name": "lame_mp3",
      "sources": ["lame_mp3.c"],
      "cflags": ["-O2"],
      "libraries": ["-lmp3lame"]
    }
  ]
}
