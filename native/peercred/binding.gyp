{
  "targets": [
    {
      "target_name": "peercred",
      "sources": ["peercred.c"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
