// Fixture helper for make_refs.sh: re-encodes an 8-bit RGB PNG as a baseline 4:2:0 JPEG with
// libjpeg (quality 90), so a JPEG case exercises the chroma upsampling llama.cpp's stb_image does.
//   cc -O2 jpeg_from_png.c -lpng -ljpeg -o jpeg_from_png && ./jpeg_from_png IN.png OUT.jpg
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  png_image img = {0};
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, argv[1])) return 1;
  img.format = PNG_FORMAT_RGB;
  unsigned char* px = malloc(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, NULL, px, 0, NULL)) return 1;
  FILE* out = fopen(argv[2], "wb");
  if (!out) return 1;
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, out);
  c.image_width = img.width;
  c.image_height = img.height;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 90, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = px + (size_t)c.next_scanline * img.width * 3;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  fclose(out);
  free(px);
  return 0;
}
