// placeholder translation unit until hwcounters sources land
