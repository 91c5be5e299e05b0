// placeholder translation unit until runtime sources land
