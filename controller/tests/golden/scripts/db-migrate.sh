nova-manage cell_v2 list_cells
