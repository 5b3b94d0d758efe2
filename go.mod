module harnessd

go 1.24
