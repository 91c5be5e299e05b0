// placeholder translation unit until analysis sources land
